#include "ops/single_prefill/single_prefill_problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

#include "attnjit/error.hpp"
#include "ops/attention_options/prefill_options.hpp"
#include "ops/tensor_checks.hpp"
#include "invalid_argument.hpp"

namespace attnjit::ops {

namespace {

constexpr int64_t kMaxLen = std::numeric_limits<int32_t>::max() / 2;

}  // namespace

SinglePrefillProblem single_prefill_problem_from_tensors(const TensorView& q, const TensorView& k,
                                                         const TensorView& v, const PrefillOptions& options) {
  if (q.ndim != 3)
    invalid(fmt::format("q: ndim={} (shape {}) is not allowed; allowed: 3, [qo_len, num_qo_heads, head_dim]", q.ndim,
                        shape_of(q)));
  SinglePrefillProblem problem = contiguous_problem<SinglePrefillProblem>(q, k, v, options);
  problem.qo_len = q.shape[0];
  return problem;
}

SinglePrefillProblem single_prefill_problem_from_json(const nlohmann::json& j) {
  std::set<std::string> keys = prefill_option_keys();
  keys.insert({"op", "num_qo_heads", "num_kv_heads", "head_dim", "qo_len", "kv_len", "q_dtype", "kv_dtype", "device"});
  problem_json::require_keys(j, keys, "single_prefill");
  SinglePrefillProblem p;
  problem_json::read_heads(j, p);
  p.qo_len = problem_json::int64_field(j, "qo_len", 1);
  p.kv_len = problem_json::int64_field(j, "kv_len", p.qo_len);
  p.device = problem_json::int_field(j, "device", 0);
  problem_json::read_dtypes(j, p);
  p.options = prefill_options_from_json(j);
  validate(p);
  return p;
}

nlohmann::json to_json(const SinglePrefillProblem& p) {
  nlohmann::json j = {{"op", "single_prefill"},         {"num_qo_heads", p.num_qo_heads},
                      {"num_kv_heads", p.num_kv_heads}, {"head_dim", p.head_dim},
                      {"qo_len", p.qo_len},             {"kv_len", p.kv_len},
                      {"q_dtype", to_string(p.q_dtype)}, {"kv_dtype", to_string(p.kv_dtype)}};
  if (p.device != 0) j["device"] = p.device;
  put_prefill_options(j, p.options);
  return j;
}

void validate(const SinglePrefillProblem& p) {
  validate_prefill_heads(p.num_qo_heads, p.num_kv_heads, p.head_dim, p.q_dtype, p.kv_dtype);
  validate_prefill_options(p.options);
  validate_prefill_backend(p.options, p.head_dim);
  validate_prefill_dtypes(p.options, p.head_dim, p.q_dtype, KVSource::Contiguous);
  if (p.qo_len < 1 || p.qo_len > kMaxLen)
    invalid(fmt::format("qo_len={} is not allowed; it must be in [1, {}]", p.qo_len, kMaxLen));
  if (p.kv_len < 1 || p.kv_len > kMaxLen)
    invalid(fmt::format("kv_len={} is not allowed; it must be in [1, {}]", p.kv_len, kMaxLen));
  if (p.qo_len * p.num_qo_heads > kMaxLen)
    invalid(fmt::format("qo_len * num_qo_heads={} is not allowed; it must be <= {}", p.qo_len * p.num_qo_heads, kMaxLen));
  // Causal with qo_len > kv_len is allowed: query i sits at kv_len - qo_len + i, and the first
  // qo_len - kv_len rows see no key (o = 0, lse = -inf), as FlashInfer computes them.
  if (p.device < 0) invalid(fmt::format("device={} must be >= 0", p.device));
}

void check_custom_mask(const SinglePrefillProblem& p, const PackedMask* mask) {
  const bool given = mask && mask->data;
  if (p.options.custom_mask) {
    const int64_t bits = p.qo_len * p.kv_len;
    const size_t need = size_t((bits + 7) / 8);
    if (!given)
      invalid(fmt::format("mask: null is not allowed; the plan has custom_mask=true, so run() needs the packed mask "
                          "of qo_len * kv_len = {} bits ({} bytes, pack_custom_mask)",
                          bits, need));
    if (mask->bytes < need)
      invalid(fmt::format("mask: bytes={} is too small; qo_len * kv_len = {} bits need {} bytes", mask->bytes, bits,
                          need));
  } else if (given) {
    invalid("mask: a custom mask is not allowed for a plan made with custom_mask=false; plan with "
            "options.custom_mask=true");
  }
}

}  // namespace attnjit::ops

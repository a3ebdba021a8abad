#include "ops/single_prefill/single_prefill_problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <limits>

#include "attnjit/error.hpp"
#include "ops/attention_options/prefill_options.hpp"

namespace attnjit::ops {

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw Error(Status::InvalidArgument, msg); }

std::string shape_of(const TensorView& t) {
  return fmt::format("[{}]", fmt::join(t.shape.begin(), t.shape.begin() + t.ndim, ", "));
}

int narrow_dim(int64_t value, const char* arg, int index, const char* meaning) {
  if (value > INT_MAX)
    invalid(fmt::format("{}: shape[{}]={} ({}) is too large; allowed: <= {}", arg, index, value, meaning, INT_MAX));
  return static_cast<int>(value);
}

constexpr int64_t kMaxLen = std::numeric_limits<int32_t>::max() / 2;

}  // namespace

SinglePrefillProblem single_prefill_problem_from_tensors(const TensorView& q, const TensorView& k,
                                                         const TensorView& v, const PrefillOptions& options) {
  const bool nhd = options.kv_layout == KVLayout::NHD;
  const char* kv_shape = nhd ? "[kv_len, num_kv_heads, head_dim] for kv_layout NHD"
                             : "[num_kv_heads, kv_len, head_dim] for kv_layout HND";
  if (q.ndim != 3)
    invalid(fmt::format("q: ndim={} (shape {}) is not allowed; allowed: 3, [qo_len, num_qo_heads, head_dim]", q.ndim,
                        shape_of(q)));
  if (k.ndim != 3)
    invalid(fmt::format("k: ndim={} (shape {}) is not allowed; allowed: 3, {}", k.ndim, shape_of(k), kv_shape));
  if (v.ndim != 3)
    invalid(fmt::format("v: ndim={} (shape {}) is not allowed; allowed: 3, {}", v.ndim, shape_of(v), kv_shape));
  if (v.shape != k.shape)
    invalid(fmt::format("v: shape {} differs from k's shape {}; they must be equal", shape_of(v), shape_of(k)));
  if (v.dtype != k.dtype)
    invalid(fmt::format("v: dtype {} differs from k's dtype {}; they must be equal", to_string(v.dtype),
                        to_string(k.dtype)));
  if (k.shape[2] != q.shape[2])
    invalid(fmt::format("k: head_dim (shape[2])={} differs from q's head_dim (shape[2])={}; they must be equal",
                        k.shape[2], q.shape[2]));
  if (k.device != q.device || v.device != q.device)
    invalid(fmt::format("k, v: devices cuda:{}, cuda:{} differ from q's device cuda:{}; all tensors must be on one "
                        "device",
                        k.device, v.device, q.device));
  SinglePrefillProblem p;
  p.qo_len = q.shape[0];
  p.num_qo_heads = narrow_dim(q.shape[1], "q", 1, "num_qo_heads");
  p.head_dim = narrow_dim(q.shape[2], "q", 2, "head_dim");
  p.num_kv_heads = narrow_dim(k.shape[nhd ? 1 : 0], "k", nhd ? 1 : 0, "num_kv_heads");
  p.kv_len = k.shape[nhd ? 0 : 1];
  p.q_dtype = q.dtype;
  p.kv_dtype = k.dtype;
  p.device = q.device;
  p.options = options;
  return p;
}

SinglePrefillProblem single_prefill_problem_from_json(const nlohmann::json& j) {
  if (!j.is_object()) invalid(fmt::format("a single_prefill problem must be a JSON object, got {}", j.dump()));
  std::set<std::string> keys = prefill_option_keys();
  keys.insert({"op", "num_qo_heads", "num_kv_heads", "head_dim", "qo_len", "kv_len", "q_dtype", "kv_dtype", "device"});
  for (const auto& item : j.items())
    if (!keys.count(item.key()))
      invalid(fmt::format("problem.{} is not a single_prefill field; allowed: {}", item.key(), fmt::join(keys, ", ")));
  SinglePrefillProblem p;
  p.num_qo_heads = problem_json::int_of(j, "num_qo_heads");
  p.num_kv_heads = problem_json::int_of(j, "num_kv_heads");
  p.head_dim = problem_json::int_of(j, "head_dim");
  p.qo_len = j.contains("qo_len") ? problem_json::int64_of(j, "qo_len") : 1;
  p.kv_len = j.contains("kv_len") ? problem_json::int64_of(j, "kv_len") : p.qo_len;
  p.device = j.contains("device") ? problem_json::int_of(j, "device") : 0;
  p.q_dtype = parse_dtype(j.value("q_dtype", std::string("bfloat16")), "problem.q_dtype");
  p.kv_dtype = j.contains("kv_dtype") ? parse_dtype(j.at("kv_dtype").get<std::string>(), "problem.kv_dtype") : p.q_dtype;
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

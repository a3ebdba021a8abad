#include "ops/single_decode/single_decode_problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <set>

#include "attnjit/error.hpp"
#include "invalid_argument.hpp"
#include "ops/attention_options/decode_options.hpp"
#include "ops/tensor_checks.hpp"

namespace attnjit::ops {

SingleDecodeProblem single_decode_problem_from_tensors(const TensorView& q, const TensorView& k, const TensorView& v,
                                                       const SingleDecodeOptions& options) {
  if (q.ndim != 2)
    invalid(fmt::format("q: ndim={} (shape {}) is not allowed; allowed: 2, [num_qo_heads, head_dim]", q.ndim,
                        shape_of(q)));
  return contiguous_problem<SingleDecodeProblem>(q, k, v, options);
}

SingleDecodeProblem single_decode_problem_from_json(const nlohmann::json& j) {
  static const std::set<std::string> keys = decode_problem_keys(
      {"op", "num_qo_heads", "num_kv_heads", "head_dim", "kv_len", "q_dtype", "kv_dtype", "device"});
  problem_json::require_keys(j, keys, "single_decode");
  SingleDecodeProblem p;
  problem_json::read_heads(j, p);
  p.kv_len = problem_json::int_field(j, "kv_len", 1);
  p.device = problem_json::int_field(j, "device", 0);
  problem_json::read_dtypes(j, p);
  read_decode_options(j, p.options);
  validate(p);
  return p;
}

nlohmann::json to_json(const SingleDecodeProblem& p) {
  nlohmann::json j = {{"op", "single_decode"},
                      {"num_qo_heads", p.num_qo_heads},
                      {"num_kv_heads", p.num_kv_heads},
                      {"head_dim", p.head_dim},
                      {"kv_len", p.kv_len},
                      {"q_dtype", to_string(p.q_dtype)},
                      {"kv_dtype", to_string(p.kv_dtype)}};
  if (p.device != 0) j["device"] = p.device;
  put_decode_options(j, p.options);
  return j;
}

void validate(const SingleDecodeProblem& p) {
  validate_heads(p.num_qo_heads, p.num_kv_heads, p.head_dim);
  if (p.kv_len < 1 || p.kv_len > std::numeric_limits<int32_t>::max() / 2)
    invalid(fmt::format("kv_len={} is not allowed; it must be in [1, {}]", p.kv_len,
                        std::numeric_limits<int32_t>::max() / 2));
  if (p.q_dtype != DType::F16 && p.q_dtype != DType::BF16)
    invalid(fmt::format("q.dtype={} is not supported; allowed: float16, bfloat16", to_string(p.q_dtype)));
  const bool kv16 = p.kv_dtype == DType::F16 || p.kv_dtype == DType::BF16;
  const bool kv8 = p.kv_dtype == DType::E4M3 || p.kv_dtype == DType::E5M2;
  if (!kv16 && !kv8)
    invalid(fmt::format("k.dtype={} is not supported; allowed: float16, bfloat16, float8_e4m3fn, float8_e5m2",
                        to_string(p.kv_dtype)));
  if (kv16 && p.kv_dtype != p.q_dtype)
    invalid(fmt::format("k.dtype={} must equal q.dtype={} for 16-bit KV (fp8 KV may pair with either)",
                        to_string(p.kv_dtype), to_string(p.q_dtype)));
  if (p.device < 0) invalid(fmt::format("device={} must be >= 0", p.device));
  validate_decode_options(p.options);
}

}  // namespace attnjit::ops

#include "ops/single_decode/single_decode_problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <cmath>
#include <limits>
#include <set>

#include "attnjit/error.hpp"

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

void check_positive_finite(const std::optional<float>& v, const char* name) {
  if (v && !(std::isfinite(*v) && *v > 0.f))
    invalid(fmt::format("{}={} is not allowed; it must be a finite number > 0", name, *v));
}

// Typed reads of a problem's JSON fields, naming the key on a mismatch.
const nlohmann::json* field(const nlohmann::json& j, const char* key) {
  return j.contains(key) ? &j.at(key) : nullptr;
}
int int_of(const nlohmann::json& j, const char* key) {
  const auto* v = field(j, key);
  if (!v) invalid(fmt::format("problem.{} is missing (an integer)", key));
  if (!v->is_number_integer() || v->get<int64_t>() > INT_MAX || v->get<int64_t>() < INT_MIN)
    invalid(fmt::format("problem.{}={} is not allowed; expected a 32-bit integer", key, v->dump()));
  return v->get<int>();
}
std::string string_of(const nlohmann::json& j, const char* key, const char* fallback) {
  const auto* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_string()) invalid(fmt::format("problem.{}={} is not allowed; expected a string", key, v->dump()));
  return v->get<std::string>();
}
std::optional<float> float_of(const nlohmann::json& j, const char* key) {
  const auto* v = field(j, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) invalid(fmt::format("problem.{}={} is not allowed; expected a number", key, v->dump()));
  return v->get<float>();
}
bool bool_of(const nlohmann::json& j, const char* key) {
  const auto* v = field(j, key);
  if (!v) return false;
  if (!v->is_boolean()) invalid(fmt::format("problem.{}={} is not allowed; expected true or false", key, v->dump()));
  return v->get<bool>();
}

const std::set<std::string>& known_keys() {
  static const std::set<std::string> keys = {
      "op",        "num_qo_heads", "num_kv_heads",     "head_dim", "kv_len",    "q_dtype",    "kv_dtype",
      "kv_layout", "pos_encoding_mode", "use_tensor_cores", "window_left", "logits_soft_cap", "sm_scale",
      "rope_scale", "rope_theta",  "q_scale",          "k_scale",  "v_scale",   "return_lse", "device"};
  return keys;
}

}  // namespace

SingleDecodeProblem single_decode_problem_from_tensors(const TensorView& q, const TensorView& k, const TensorView& v,
                                                       const SingleDecodeOptions& options) {
  const bool nhd = options.kv_layout == KVLayout::NHD;
  const char* kv_shape = nhd ? "[kv_len, num_kv_heads, head_dim] for kv_layout NHD"
                             : "[num_kv_heads, kv_len, head_dim] for kv_layout HND";
  if (q.ndim != 2)
    invalid(fmt::format("q: ndim={} (shape {}) is not allowed; allowed: 2, [num_qo_heads, head_dim]", q.ndim,
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
  if (k.shape[2] != q.shape[1])
    invalid(fmt::format("k: head_dim (shape[2])={} differs from q's head_dim (shape[1])={}; they must be equal",
                        k.shape[2], q.shape[1]));
  if (k.device != q.device)
    invalid(fmt::format("k: device cuda:{} differs from q's device cuda:{}; all tensors must be on one device",
                        k.device, q.device));
  if (v.device != q.device)
    invalid(fmt::format("v: device cuda:{} differs from q's device cuda:{}; all tensors must be on one device",
                        v.device, q.device));

  SingleDecodeProblem p;
  p.num_qo_heads = narrow_dim(q.shape[0], "q", 0, "num_qo_heads");
  p.head_dim = narrow_dim(q.shape[1], "q", 1, "head_dim");
  p.num_kv_heads = narrow_dim(k.shape[nhd ? 1 : 0], "k", nhd ? 1 : 0, "num_kv_heads");
  p.kv_len = k.shape[nhd ? 0 : 1];
  p.q_dtype = q.dtype;
  p.kv_dtype = k.dtype;
  p.device = q.device;
  p.options = options;
  return p;
}

SingleDecodeProblem single_decode_problem_from_json(const nlohmann::json& j) {
  if (!j.is_object()) invalid(fmt::format("a single_decode problem must be a JSON object, got {}", j.dump()));
  for (const auto& item : j.items())
    if (!known_keys().count(item.key()))
      invalid(fmt::format("problem.{} is not a single_decode field; allowed: {}", item.key(),
                          fmt::join(known_keys(), ", ")));
  SingleDecodeProblem p;
  p.num_qo_heads = int_of(j, "num_qo_heads");
  p.num_kv_heads = int_of(j, "num_kv_heads");
  p.head_dim = int_of(j, "head_dim");
  p.kv_len = j.contains("kv_len") ? int_of(j, "kv_len") : 1;
  p.device = j.contains("device") ? int_of(j, "device") : 0;
  p.q_dtype = parse_dtype(string_of(j, "q_dtype", "bfloat16"), "problem.q_dtype");
  p.kv_dtype = j.contains("kv_dtype") ? parse_dtype(string_of(j, "kv_dtype", ""), "problem.kv_dtype") : p.q_dtype;
  auto& o = p.options;
  o.kv_layout = parse_kv_layout(string_of(j, "kv_layout", "NHD"), "problem.kv_layout");
  o.pos_encoding_mode = parse_pos_encoding(string_of(j, "pos_encoding_mode", "NONE"), "problem.pos_encoding_mode");
  o.use_tensor_cores = bool_of(j, "use_tensor_cores");
  o.window_left = j.contains("window_left") ? int_of(j, "window_left") : -1;
  o.logits_soft_cap = float_of(j, "logits_soft_cap");
  if (o.logits_soft_cap && *o.logits_soft_cap == 0.f) o.logits_soft_cap.reset();  // 0: no capping
  o.sm_scale = float_of(j, "sm_scale");
  o.rope_scale = float_of(j, "rope_scale");
  o.rope_theta = float_of(j, "rope_theta");
  o.q_scale = float_of(j, "q_scale");
  o.k_scale = float_of(j, "k_scale");
  o.v_scale = float_of(j, "v_scale");
  o.return_lse = bool_of(j, "return_lse");
  validate(p);
  return p;
}

nlohmann::json to_json(const SingleDecodeProblem& p) {
  const auto& o = p.options;
  nlohmann::json j = {{"op", "single_decode"},
                      {"num_qo_heads", p.num_qo_heads},
                      {"num_kv_heads", p.num_kv_heads},
                      {"head_dim", p.head_dim},
                      {"kv_len", p.kv_len},
                      {"q_dtype", to_string(p.q_dtype)},
                      {"kv_dtype", to_string(p.kv_dtype)},
                      {"kv_layout", to_string(o.kv_layout)},
                      {"pos_encoding_mode", to_string(o.pos_encoding_mode)},
                      {"use_tensor_cores", o.use_tensor_cores},
                      {"window_left", o.window_left},
                      {"return_lse", o.return_lse}};
  if (p.device != 0) j["device"] = p.device;
  auto put = [&](const char* key, const std::optional<float>& v) {
    if (v) j[key] = *v;
  };
  put("logits_soft_cap", o.logits_soft_cap);
  put("sm_scale", o.sm_scale);
  put("rope_scale", o.rope_scale);
  put("rope_theta", o.rope_theta);
  put("q_scale", o.q_scale);
  put("k_scale", o.k_scale);
  put("v_scale", o.v_scale);
  return j;
}

void validate(const SingleDecodeProblem& p) {
  if (p.num_qo_heads <= 0) invalid(fmt::format("num_qo_heads={} must be > 0", p.num_qo_heads));
  if (p.num_kv_heads <= 0) invalid(fmt::format("num_kv_heads={} must be > 0", p.num_kv_heads));
  if (p.num_qo_heads % p.num_kv_heads != 0)
    invalid(fmt::format("num_qo_heads={} must be a multiple of num_kv_heads={} (grouped-query attention)",
                        p.num_qo_heads, p.num_kv_heads));
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256 && p.head_dim != 512)
    throw Error(Status::Unsupported,
                fmt::format("head_dim={} is not supported; supported: 64, 128, 256, 512", p.head_dim));
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
  const auto& o = p.options;
  if (o.window_left < -1) invalid(fmt::format("window_left={} is not allowed; use -1 (no window) or >= 0", o.window_left));
  check_positive_finite(o.q_scale, "q_scale");
  check_positive_finite(o.k_scale, "k_scale");
  check_positive_finite(o.v_scale, "v_scale");
  check_positive_finite(o.sm_scale, "sm_scale");
  check_positive_finite(o.rope_scale, "rope_scale");
  check_positive_finite(o.rope_theta, "rope_theta");
  if (o.logits_soft_cap && !(std::isfinite(*o.logits_soft_cap) && *o.logits_soft_cap >= 0.f))
    invalid(fmt::format("logits_soft_cap={} is not allowed; it must be >= 0 (0: no capping)", *o.logits_soft_cap));
}

}  // namespace attnjit::ops

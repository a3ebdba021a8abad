#include "ops/attention_options/prefill_options.hpp"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <optional>

#include "attnjit/error.hpp"

namespace attnjit::ops {

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw Error(Status::InvalidArgument, msg); }

const nlohmann::json* field(const nlohmann::json& j, const char* key) {
  return j.contains(key) ? &j.at(key) : nullptr;
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

void check_positive_finite(const std::optional<float>& v, const char* name) {
  if (v && !(std::isfinite(*v) && *v > 0.f))
    invalid(fmt::format("{}={} is not allowed; it must be a finite number > 0", name, *v));
}

}  // namespace

namespace problem_json {
int64_t int64_of(const nlohmann::json& j, const char* key) {
  const auto* v = field(j, key);
  if (!v) invalid(fmt::format("problem.{} is missing (an integer)", key));
  if (!v->is_number_integer()) invalid(fmt::format("problem.{}={} is not allowed; expected an integer", key, v->dump()));
  return v->get<int64_t>();
}
int int_of(const nlohmann::json& j, const char* key) {
  const int64_t x = int64_of(j, key);
  if (x > INT_MAX || x < INT_MIN)
    invalid(fmt::format("problem.{}={} is not allowed; expected a 32-bit integer", key, x));
  return static_cast<int>(x);
}
}  // namespace problem_json

const std::set<std::string>& prefill_option_keys() {
  static const std::set<std::string> keys = {
      "causal",     "custom_mask",  "kv_layout", "pos_encoding_mode", "allow_fp16_qk_reduction", "window_left",
      "logits_soft_cap", "sm_scale", "rope_scale", "rope_theta",      "backend",                 "return_lse",
      "k_scale",    "v_scale"};
  return keys;
}

PrefillOptions prefill_options_from_json(const nlohmann::json& j) {
  PrefillOptions o;
  o.causal = bool_of(j, "causal");
  o.custom_mask = bool_of(j, "custom_mask");
  o.kv_layout = parse_kv_layout(string_of(j, "kv_layout", "NHD"), "problem.kv_layout");
  o.pos_encoding_mode = parse_pos_encoding(string_of(j, "pos_encoding_mode", "NONE"), "problem.pos_encoding_mode");
  o.allow_fp16_qk_reduction = bool_of(j, "allow_fp16_qk_reduction");
  o.window_left = j.contains("window_left") ? problem_json::int_of(j, "window_left") : -1;
  o.logits_soft_cap = float_of(j, "logits_soft_cap");
  if (o.logits_soft_cap && *o.logits_soft_cap == 0.f) o.logits_soft_cap.reset();  // 0: no capping
  o.sm_scale = float_of(j, "sm_scale");
  o.rope_scale = float_of(j, "rope_scale");
  o.rope_theta = float_of(j, "rope_theta");
  o.k_scale = float_of(j, "k_scale");
  o.v_scale = float_of(j, "v_scale");
  o.backend = string_of(j, "backend", "auto");
  o.return_lse = bool_of(j, "return_lse");
  return o;
}

void put_prefill_options(nlohmann::json& j, const PrefillOptions& o) {
  j["causal"] = o.causal;
  j["custom_mask"] = o.custom_mask;
  j["kv_layout"] = to_string(o.kv_layout);
  j["pos_encoding_mode"] = to_string(o.pos_encoding_mode);
  j["allow_fp16_qk_reduction"] = o.allow_fp16_qk_reduction;
  j["window_left"] = o.window_left;
  j["backend"] = o.backend;
  j["return_lse"] = o.return_lse;
  auto put = [&](const char* key, const std::optional<float>& v) {
    if (v) j[key] = *v;
  };
  put("logits_soft_cap", o.logits_soft_cap);
  put("sm_scale", o.sm_scale);
  put("rope_scale", o.rope_scale);
  put("rope_theta", o.rope_theta);
  put("k_scale", o.k_scale);
  put("v_scale", o.v_scale);
}

void validate_prefill_options(const PrefillOptions& o) {
  // 'fa3_ws': the warp-specialized Hopper skeleton, asked for by name until it replaces fa3's.
  if (o.backend != "auto" && o.backend != "fa2" && o.backend != "fa3" && o.backend != "fa3_ws")
    invalid(fmt::format("backend='{}' is not a backend; allowed: 'auto', 'fa2', 'fa3', 'fa3_ws'", o.backend));
  if (o.window_left < -1)
    invalid(fmt::format("window_left={} is not allowed; use -1 (no window) or >= 0", o.window_left));
  if (o.allow_fp16_qk_reduction)  // refused, not ignored: the caller asked for another arithmetic
    throw Error(Status::Unsupported, "use_fp16_qk_reduction=true is not supported: q.k always accumulates in "
                                     "fp32; allowed: false");
  check_positive_finite(o.sm_scale, "sm_scale");
  check_positive_finite(o.rope_scale, "rope_scale");
  check_positive_finite(o.rope_theta, "rope_theta");
  check_positive_finite(o.k_scale, "k_scale");
  check_positive_finite(o.v_scale, "v_scale");
  if (o.logits_soft_cap && !(std::isfinite(*o.logits_soft_cap) && *o.logits_soft_cap >= 0.f))
    invalid(fmt::format("logits_soft_cap={} is not allowed; it must be >= 0 (0: no capping)", *o.logits_soft_cap));
}

void validate_prefill_heads(int num_qo_heads, int num_kv_heads, int head_dim, DType q_dtype, DType kv_dtype) {
  if (num_qo_heads <= 0) invalid(fmt::format("num_qo_heads={} must be > 0", num_qo_heads));
  if (num_kv_heads <= 0) invalid(fmt::format("num_kv_heads={} must be > 0", num_kv_heads));
  if (num_qo_heads % num_kv_heads != 0)
    invalid(fmt::format("num_qo_heads={} must be a multiple of num_kv_heads={} (grouped-query attention)",
                        num_qo_heads, num_kv_heads));
  if (head_dim != 64 && head_dim != 128 && head_dim != 256 && head_dim != 512)
    throw Error(Status::Unsupported,
                fmt::format("head_dim={} is not supported; supported: 64, 128, 256, 512", head_dim));
  if (q_dtype != DType::F16 && q_dtype != DType::BF16)
    invalid(fmt::format("q.dtype={} is not supported; allowed: float16, bfloat16", to_string(q_dtype)));
  const bool kv8 = kv_dtype == DType::E4M3 || kv_dtype == DType::E5M2;
  if (!kv8 && kv_dtype != q_dtype)
    invalid(fmt::format("k.dtype={} is not allowed with q.dtype={}; allowed: {}, float8_e4m3fn, float8_e5m2",
                        to_string(kv_dtype), to_string(q_dtype), to_string(q_dtype)));
}

PrefillKernel prefill_variant(const PrefillOptions& o, int head_dim, DType q_dtype, DType kv_dtype) {
  PrefillKernel s;
  s.head_dim = head_dim;
  s.variant.q_dtype = q_dtype;
  s.variant.kv_dtype = kv_dtype;
  s.variant.o_dtype = q_dtype;
  s.variant.pos_encoding = o.pos_encoding_mode;
  s.variant.soft_cap = o.logits_soft_cap.value_or(0.f) > 0.f;
  s.variant.mask = o.custom_mask ? MaskMode::Custom : o.causal ? MaskMode::Causal : MaskMode::None;
  s.window = o.window_left >= 0;
  s.warp_specialized = o.backend == "fa3_ws";
  return s;
}

void validate_prefill_backend(const PrefillOptions& o, int head_dim) {
  if ((o.backend == "fa3" || o.backend == "fa3_ws") && !fa3_takes_head_dim(head_dim))
    throw Error(Status::Unsupported, fmt::format("backend='{}' takes head_dim 64, 128 or 256; head_dim={} is not "
                                                 "supported there; allowed: 'auto', 'fa2'",
                                                 o.backend, head_dim));
  // 256-wide heads leave the producer no registers for the rotation walk
  // (ptxas: 120-130 bytes of spills at every split of the registers).
  if (o.backend == "fa3_ws" && o.pos_encoding_mode == PosEncoding::RopeLlama && head_dim > 128)
    throw Error(Status::Unsupported, fmt::format("backend='fa3_ws' takes pos_encoding_mode=ROPE_LLAMA at head_dim 64 "
                                                 "or 128; head_dim={} is not supported there; allowed: 'auto', "
                                                 "'fa2', 'fa3'",
                                                 head_dim));
}

PrefillBackend prefill_backend(const PrefillOptions& o, DType kv_dtype, const std::string& arch, int head_dim) {
  const bool wgmma = PrefillKernel::fa3_runs_on(arch), kv16 = dtype_size(kv_dtype) == 2;
  validate_prefill_backend(o, head_dim);
  if (o.backend == "fa3" || o.backend == "fa3_ws") {
    if (!wgmma)
      throw Error(Status::Unsupported,
                  fmt::format("backend='{}' needs a Hopper GPU (sm_90a); this device is {}; allowed here: 'auto', "
                              "'fa2'",
                              o.backend, arch));
    if (!kv16)
      throw Error(Status::Unsupported,
                  fmt::format("backend='{}' takes 16-bit K/V; kv dtype {} is not supported there; allowed: 'auto', "
                              "'fa2'",
                              o.backend, to_string(kv_dtype)));
    return PrefillBackend::Fa3;
  }
  return o.backend == "auto" && wgmma && kv16 && fa3_takes_head_dim(head_dim) ? PrefillBackend::Fa3
                                                                               : PrefillBackend::Fa2;
}

kernels::VariantParams prefill_variant_params(const PrefillOptions& o, int head_dim) {
  kernels::VariantParams v{};
  // fp8 calibration scales fold into the logit scale and the output (as in decode).
  v.sm_scale = o.sm_scale.value_or(1.f / std::sqrt(float(head_dim))) * o.k_scale.value_or(1.f);
  v.v_scale = o.v_scale.value_or(1.f);
  v.soft_cap = o.logits_soft_cap.value_or(0.f);
  v.rope_rcp_scale = 1.f / o.rope_scale.value_or(1.f);
  v.rope_log2_theta = std::log2(o.rope_theta.value_or(1e4f));
  v.window_left = o.window_left;
  return v;
}

}  // namespace attnjit::ops

#include "ops/attention_options/prefill_options.hpp"

#include <fmt/format.h>

#include <cmath>

#include "attnjit/error.hpp"
#include "invalid_argument.hpp"
#include "ops/attention_options/user_variant_options.hpp"

namespace attnjit::ops {

const std::set<std::string>& prefill_option_keys() {
  static const std::set<std::string> keys = [] {
    std::set<std::string> k = attention_option_keys();
    k.insert({"causal", "custom_mask", "allow_fp16_qk_reduction", "backend", "o_dtype"});
    return k;
  }();
  return keys;
}

PrefillOptions prefill_options_from_json(const nlohmann::json& j) {
  PrefillOptions o;
  read_attention_options(j, o);
  o.causal = problem_json::bool_field(j, "causal", false);
  o.custom_mask = problem_json::bool_field(j, "custom_mask", false);
  o.allow_fp16_qk_reduction = problem_json::bool_field(j, "allow_fp16_qk_reduction", false);
  o.backend = problem_json::string_field(j, "backend", "auto");
  if (j.contains("o_dtype")) o.o_dtype = parse_dtype(problem_json::string_field(j, "o_dtype", ""), "problem.o_dtype");
  return o;
}

void put_prefill_options(nlohmann::json& j, const PrefillOptions& o) {
  put_attention_options(j, o);
  j["causal"] = o.causal;
  j["custom_mask"] = o.custom_mask;
  j["allow_fp16_qk_reduction"] = o.allow_fp16_qk_reduction;
  j["backend"] = o.backend;
  if (o.o_dtype) j["o_dtype"] = to_string(*o.o_dtype);  // absent: q's dtype
}

void validate_prefill_options(const PrefillOptions& o) {
  // 'fa3_ws': the warp-specialized Hopper skeleton ('auto' takes it on sm_90a where it serves the variant).
  if (o.backend != "auto" && o.backend != "fa2" && o.backend != "fa3" && o.backend != "fa3_ws")
    invalid(fmt::format("backend='{}' is not a backend; allowed: 'auto', 'fa2', 'fa3', 'fa3_ws'", o.backend));
  if (o.allow_fp16_qk_reduction)  // refused, not ignored: the caller asked for another arithmetic
    throw Error(Status::Unsupported, "use_fp16_qk_reduction=true is not supported: q.k always accumulates in "
                                     "fp32; allowed: false");
  validate_attention_options(o);
  check_prefill_user_variant(o.variant ? &o.variant->source() : nullptr, o.causal, o.custom_mask);
}

void validate_prefill_heads(int num_qo_heads, int num_kv_heads, int head_dim, DType q_dtype, DType kv_dtype) {
  validate_heads(num_qo_heads, num_kv_heads, head_dim);
  if (q_dtype == DType::E4M3) {  // fp8 attention: q, k and v all e4m3 (validate_prefill_dtypes checks the rest)
    if (kv_dtype != DType::E4M3)
      throw Error(Status::Unsupported,
                  fmt::format("k.dtype={} is not supported with q.dtype=float8_e4m3fn; allowed: float8_e4m3fn (q, k "
                              "and v all e4m3)",
                              to_string(kv_dtype)));
    return;
  }
  if (q_dtype == DType::E5M2)
    throw Error(Status::Unsupported,
                "q.dtype=float8_e5m2 is not supported; allowed: float16, bfloat16, float8_e4m3fn (with e4m3 k and v)");
  if (q_dtype != DType::F16 && q_dtype != DType::BF16)
    invalid(fmt::format("q.dtype={} is not supported; allowed: float16, bfloat16, float8_e4m3fn",
                        to_string(q_dtype)));
  const bool kv8 = kv_dtype == DType::E4M3 || kv_dtype == DType::E5M2;
  if (!kv8 && kv_dtype != q_dtype)
    invalid(fmt::format("k.dtype={} is not allowed with q.dtype={}; allowed: {}, float8_e4m3fn, float8_e5m2",
                        to_string(kv_dtype), to_string(q_dtype), to_string(q_dtype)));
}

void validate_prefill_dtypes(const PrefillOptions& o, int head_dim, DType q_dtype, KVSource source) {
  auto refuse = [](const std::string& what) { throw Error(Status::Unsupported, what); };
  if (q_dtype != DType::E4M3) {
    if (o.o_dtype && *o.o_dtype != q_dtype)
      refuse(fmt::format("o_dtype={} is not supported with q.dtype={}; allowed: {} (q's dtype; another output dtype "
                         "only with float8_e4m3fn q)",
                         to_string(*o.o_dtype), to_string(q_dtype), to_string(q_dtype)));
    return;
  }
  constexpr const char* kFp8 = "with q.dtype=float8_e4m3fn (the warp-specialized Hopper kernel)";
  if (!o.o_dtype || (*o.o_dtype != DType::F16 && *o.o_dtype != DType::BF16))
    refuse(fmt::format("o_dtype={} is not supported {}: an fp8 output is not written; allowed: float16, bfloat16",
                       o.o_dtype ? to_string(*o.o_dtype) : "None (q's dtype, float8_e4m3fn)", kFp8));
  if (head_dim != 128) refuse(fmt::format("head_dim={} is not supported {}; allowed: 128", head_dim, kFp8));
  if (o.backend != "auto" && o.backend != "fa3_ws")
    refuse(fmt::format("backend='{}' is not supported {}; allowed: 'auto', 'fa3_ws' (sm_90a)", o.backend, kFp8));
  if (o.pos_encoding_mode != PosEncoding::None)
    refuse(fmt::format("pos_encoding_mode={} is not supported {}; allowed: NONE", to_string(o.pos_encoding_mode),
                       kFp8));
  if (o.logits_soft_cap.value_or(0.f) != 0.f)
    refuse(fmt::format("logits_soft_cap={} is not supported {}; allowed: None or 0", *o.logits_soft_cap, kFp8));
  if (o.variant) refuse(fmt::format("variant: a user variant is not supported {}; allowed: None", kFp8));
  if (source == KVSource::Paged)
    refuse(fmt::format("a paged KV cache is not supported {}; allowed: contiguous K/V (single_prefill_with_kv_cache) "
                       "or ragged K/V (BatchPrefillWithRaggedKVCacheWrapper)",
                       kFp8));
}

PrefillKernel prefill_variant(const PrefillOptions& o, int head_dim, DType q_dtype, DType kv_dtype) {
  PrefillKernel s;
  s.head_dim = head_dim;
  s.variant.q_dtype = q_dtype;
  s.variant.kv_dtype = kv_dtype;
  s.variant.o_dtype = o.o_dtype.value_or(q_dtype);
  s.variant.pos_encoding = o.pos_encoding_mode;
  s.variant.soft_cap = o.logits_soft_cap.value_or(0.f) > 0.f;
  s.variant.mask = o.custom_mask ? MaskMode::Custom : o.causal ? MaskMode::Causal : MaskMode::None;
  s.window = o.window_left >= 0;
  apply_user_variant(user_source(o.variant), o.causal, o.custom_mask, s);  // a mask_mod plans Custom
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

#include "api/c_api_convert.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <cstddef>
#include <cmath>
#include <optional>

#include "api/c_api_variant.hpp"
#include "attnjit/error.hpp"

namespace attnjit::capi {

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw Error(Status::InvalidArgument, msg); }

std::optional<float> provided(float value, const char* field) {
  if (!std::isfinite(value))
    invalid(fmt::format("options->{}={} is not finite; allowed: a finite value, or 0 for the default", field, value));
  if (value == 0.0f) return std::nullopt;
  return value;
}

}  // namespace

SingleDecodeOptions to_options(const attnjit_decode_options_t* options, bool return_lse) {
  SingleDecodeOptions o;
  o.return_lse = return_lse;
  if (options == nullptr) return o;
  // The fields are all present in every layout so far; struct_size tells a
  // caller that skipped attnjit_decode_options_init (0 or garbage) apart.
  constexpr uint32_t kFirstLayout = offsetof(attnjit_decode_options_t, rope_theta) + sizeof(float);
  if (options->struct_size < kFirstLayout || options->struct_size > (1u << 16))
    invalid(fmt::format("options->struct_size={} is not a size this library knows (it is {}); call "
                        "attnjit_decode_options_init first",
                        options->struct_size, sizeof(attnjit_decode_options_t)));

  switch (options->kv_layout) {
    case ATTNJIT_KV_LAYOUT_NHD: o.kv_layout = KVLayout::NHD; break;
    case ATTNJIT_KV_LAYOUT_HND: o.kv_layout = KVLayout::HND; break;
    default:
      invalid(fmt::format("options->kv_layout={} is not a layout; allowed: 0 (NHD), 1 (HND)", options->kv_layout));
  }
  switch (options->pos_encoding_mode) {
    case ATTNJIT_POS_ENCODING_NONE: o.pos_encoding_mode = PosEncoding::None; break;
    case ATTNJIT_POS_ENCODING_ROPE_LLAMA: o.pos_encoding_mode = PosEncoding::RopeLlama; break;
    case ATTNJIT_POS_ENCODING_ALIBI: o.pos_encoding_mode = PosEncoding::Alibi; break;
    default:
      invalid(fmt::format("options->pos_encoding_mode={} is not a positional encoding; "
                          "allowed: 0 (NONE), 1 (ROPE_LLAMA), 2 (ALIBI)",
                          options->pos_encoding_mode));
  }
  if (options->use_tensor_cores != 0 && options->use_tensor_cores != 1)
    invalid(fmt::format("options->use_tensor_cores={} is not a flag; allowed: 0, 1", options->use_tensor_cores));
  o.use_tensor_cores = options->use_tensor_cores == 1;
  if (options->window_left < -1)
    invalid(fmt::format("options->window_left={} is not allowed; allowed: -1 (whole sequence) or >= 0",
                        options->window_left));
  o.window_left = options->window_left;

  o.q_scale = provided(options->q_scale, "q_scale");
  o.k_scale = provided(options->k_scale, "k_scale");
  o.v_scale = provided(options->v_scale, "v_scale");
  o.logits_soft_cap = provided(options->logits_soft_cap, "logits_soft_cap");
  o.sm_scale = provided(options->sm_scale, "sm_scale");
  o.rope_scale = provided(options->rope_scale, "rope_scale");
  o.rope_theta = provided(options->rope_theta, "rope_theta");
  if (options->struct_size >= offsetof(attnjit_decode_options_t, variant) + sizeof(void*))
    o.variant = variant_of(options->variant);
  return o;
}

void check_struct_size(uint32_t have, size_t first_layout, size_t ours, const char* init) {
  if (have < first_layout || have > (1u << 16))
    invalid(fmt::format("options->struct_size={} is not a size this library knows (it is {}); call {} first", have,
                        ours, init));
}

PrefillOptions to_prefill_options(const attnjit_prefill_options_t* options, bool return_lse) {
  PrefillOptions o;
  o.return_lse = return_lse;
  if (options == nullptr) return o;
  constexpr uint32_t kFirstLayout = offsetof(attnjit_prefill_options_t, rope_theta) + sizeof(float);
  if (options->struct_size < kFirstLayout || options->struct_size > (1u << 16))
    invalid(fmt::format("options->struct_size={} is not a size this library knows (it is {}); call "
                        "attnjit_prefill_options_init first",
                        options->struct_size, sizeof(attnjit_prefill_options_t)));
  auto flag = [](int32_t v, const char* field) {
    if (v != 0 && v != 1) invalid(fmt::format("options->{}={} is not a flag; allowed: 0, 1", field, v));
    return v == 1;
  };
  o.causal = flag(options->causal, "causal");
  o.allow_fp16_qk_reduction = flag(options->allow_fp16_qk_reduction, "allow_fp16_qk_reduction");
  switch (options->kv_layout) {
    case ATTNJIT_KV_LAYOUT_NHD: o.kv_layout = KVLayout::NHD; break;
    case ATTNJIT_KV_LAYOUT_HND: o.kv_layout = KVLayout::HND; break;
    default:
      invalid(fmt::format("options->kv_layout={} is not a layout; allowed: 0 (NHD), 1 (HND)", options->kv_layout));
  }
  switch (options->pos_encoding_mode) {
    case ATTNJIT_POS_ENCODING_NONE: o.pos_encoding_mode = PosEncoding::None; break;
    case ATTNJIT_POS_ENCODING_ROPE_LLAMA: o.pos_encoding_mode = PosEncoding::RopeLlama; break;
    case ATTNJIT_POS_ENCODING_ALIBI: o.pos_encoding_mode = PosEncoding::Alibi; break;
    default:
      invalid(fmt::format("options->pos_encoding_mode={} is not a positional encoding; "
                          "allowed: 0 (NONE), 1 (ROPE_LLAMA), 2 (ALIBI)",
                          options->pos_encoding_mode));
  }
  if (options->window_left < -1)
    invalid(fmt::format("options->window_left={} is not allowed; allowed: -1 (whole sequence) or >= 0",
                        options->window_left));
  o.window_left = options->window_left;
  o.logits_soft_cap = provided(options->logits_soft_cap, "logits_soft_cap");
  o.sm_scale = provided(options->sm_scale, "sm_scale");
  o.rope_scale = provided(options->rope_scale, "rope_scale");
  o.rope_theta = provided(options->rope_theta, "rope_theta");
  // backend: only in structs that have it (struct_size says so).
  if (options->struct_size >= offsetof(attnjit_prefill_options_t, backend) + sizeof(int32_t)) {
    switch (options->backend) {
      case ATTNJIT_PREFILL_BACKEND_AUTO: o.backend = "auto"; break;
      case ATTNJIT_PREFILL_BACKEND_FA2: o.backend = "fa2"; break;
      case ATTNJIT_PREFILL_BACKEND_FA3: o.backend = "fa3"; break;
      case ATTNJIT_PREFILL_BACKEND_FA3_WS: o.backend = "fa3_ws"; break;
      default:
        invalid(fmt::format("options->backend={} is not a backend; allowed: 0 (auto), 1 (fa2), 2 (fa3), 3 (fa3_ws)",
                            options->backend));
    }
  }
  if (options->struct_size >= offsetof(attnjit_prefill_options_t, variant) + sizeof(void*))
    o.variant = variant_of(options->variant);
  return o;
}

}  // namespace attnjit::capi

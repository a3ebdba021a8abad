#include "api/c_api_convert.hpp"

#include <fmt/format.h>

#include <cstddef>

#include "api/c_api_fields.hpp"
#include "api/c_api_variant.hpp"
#include "attnjit/error.hpp"

namespace attnjit::capi {

SingleDecodeOptions to_options(const attnjit_decode_options_t* options, bool return_lse) {
  SingleDecodeOptions o;
  o.return_lse = return_lse;
  if (options == nullptr) return o;
  check_struct_size(options->struct_size, offsetof(attnjit_decode_options_t, rope_theta) + sizeof(float),
                    sizeof(attnjit_decode_options_t), "attnjit_decode_options_init");

  o.kv_layout = kv_layout_field(options->kv_layout);
  o.pos_encoding_mode = pos_encoding_field(options->pos_encoding_mode);
  o.use_tensor_cores = flag_field(options->use_tensor_cores, "use_tensor_cores");
  o.window_left = window_left_field(options->window_left);

  o.q_scale = provided_field(options->q_scale, "q_scale");
  o.k_scale = provided_field(options->k_scale, "k_scale");
  o.v_scale = provided_field(options->v_scale, "v_scale");
  o.logits_soft_cap = provided_field(options->logits_soft_cap, "logits_soft_cap");
  o.sm_scale = provided_field(options->sm_scale, "sm_scale");
  o.rope_scale = provided_field(options->rope_scale, "rope_scale");
  o.rope_theta = provided_field(options->rope_theta, "rope_theta");
  if (options->struct_size >= offsetof(attnjit_decode_options_t, variant) + sizeof(void*))
    o.variant = variant_of(options->variant);
  return o;
}

PrefillOptions to_prefill_options(const attnjit_prefill_options_t* options, bool return_lse) {
  PrefillOptions o;
  o.return_lse = return_lse;
  if (options == nullptr) return o;
  check_struct_size(options->struct_size, offsetof(attnjit_prefill_options_t, rope_theta) + sizeof(float),
                    sizeof(attnjit_prefill_options_t), "attnjit_prefill_options_init");
  o.causal = flag_field(options->causal, "causal");
  o.allow_fp16_qk_reduction = flag_field(options->allow_fp16_qk_reduction, "allow_fp16_qk_reduction");
  o.kv_layout = kv_layout_field(options->kv_layout);
  o.pos_encoding_mode = pos_encoding_field(options->pos_encoding_mode);
  o.window_left = window_left_field(options->window_left);
  o.logits_soft_cap = provided_field(options->logits_soft_cap, "logits_soft_cap");
  o.sm_scale = provided_field(options->sm_scale, "sm_scale");
  o.rope_scale = provided_field(options->rope_scale, "rope_scale");
  o.rope_theta = provided_field(options->rope_theta, "rope_theta");
  // backend: only in structs that have it (struct_size says so).
  if (options->struct_size >= offsetof(attnjit_prefill_options_t, backend) + sizeof(int32_t)) {
    switch (options->backend) {
      case ATTNJIT_PREFILL_BACKEND_AUTO: o.backend = "auto"; break;
      case ATTNJIT_PREFILL_BACKEND_FA2: o.backend = "fa2"; break;
      case ATTNJIT_PREFILL_BACKEND_FA3: o.backend = "fa3"; break;
      case ATTNJIT_PREFILL_BACKEND_FA3_WS: o.backend = "fa3_ws"; break;
      default:
        throw Error(Status::InvalidArgument,
                    fmt::format("options->backend={} is not a backend; allowed: 0 (auto), 1 (fa2), 2 (fa3), 3 (fa3_ws)",
                                options->backend));
    }
  }
  if (options->struct_size >= offsetof(attnjit_prefill_options_t, variant) + sizeof(void*))
    o.variant = variant_of(options->variant);
  return o;
}

}  // namespace attnjit::capi

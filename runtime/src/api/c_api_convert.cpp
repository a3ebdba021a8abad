#include "api/c_api_convert.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <optional>
#include <utility>

#include "api/c_api_fields.hpp"
#include "api/c_api_variant.hpp"
#include "api/dlpack_codes.hpp"
#include "attnjit/error.hpp"

namespace attnjit::capi {

SingleDecodeOptions to_options(const attnjit_decode_options_t* options, bool return_lse) {
  SingleDecodeOptions o;
  o.return_lse = return_lse;
  if (!given(options, offsetof(attnjit_decode_options_t, rope_theta) + sizeof(float), "attnjit_decode_options_init"))
    return o;
  o.kv_layout = kv_layout_field(options->kv_layout);
  o.pos_encoding_mode = pos_encoding_field(options->pos_encoding_mode);
  o.use_tensor_cores = flag_field(options->use_tensor_cores, "use_tensor_cores");
  o.window_left = window_left_field(options->window_left);

  o.q_scale = provided_field(options->q_scale, "q_scale");
  o.k_scale = provided_field(options->k_scale, "k_scale");
  o.v_scale = provided_field(options->v_scale, "v_scale");
  read_score_fields(*options, o);
  read_variant_field(*options, o);
  return o;
}

PrefillOptions to_prefill_options(const attnjit_prefill_options_t* options, bool return_lse) {
  PrefillOptions o;
  o.return_lse = return_lse;
  if (!given(options, offsetof(attnjit_prefill_options_t, rope_theta) + sizeof(float), "attnjit_prefill_options_init"))
    return o;
  o.causal = flag_field(options->causal, "causal");
  o.allow_fp16_qk_reduction = flag_field(options->allow_fp16_qk_reduction, "allow_fp16_qk_reduction");
  o.kv_layout = kv_layout_field(options->kv_layout);
  o.pos_encoding_mode = pos_encoding_field(options->pos_encoding_mode);
  o.window_left = window_left_field(options->window_left);
  read_score_fields(*options, o);
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
  read_variant_field(*options, o);
  // o_dtype: only in structs that have it.
  if (options->struct_size >= offsetof(attnjit_prefill_options_t, o_dtype) + sizeof(DLDataType) &&
      options->o_dtype.bits != 0) {
    const std::optional<DType> d = dlpack::to_dtype(options->o_dtype);
    if (!d)
      throw Error(Status::InvalidArgument,
                  fmt::format("options->o_dtype={} is not a dtype; allowed: float16, bfloat16 (bits 0: q's)",
                              dlpack::describe(options->o_dtype)));
    o.o_dtype = *d;
  }
  return o;
}

PrefillScaleViews prefill_scales(const attnjit_prefill_options_t* options) {
  PrefillScaleViews out;
  if (!options || options->struct_size < offsetof(attnjit_prefill_options_t, scale_v) + sizeof(const DLTensor*))
    return out;
  const std::pair<const DLTensor*, const char*> given[] = {
      {options->scale_q, "scale_q"}, {options->scale_k, "scale_k"}, {options->scale_v, "scale_v"}};
  for (size_t i = 0; i < 3; ++i)
    if (given[i].first) out.views[i] = from_dlpack(given[i].first, given[i].second);
  return out;
}

}  // namespace attnjit::capi

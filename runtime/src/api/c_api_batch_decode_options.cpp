#include "api/c_api_batch_decode_options.hpp"
#include "api/c_api_fields.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstddef>

#include "api/c_api_variant.hpp"
#include "api/dlpack_codes.hpp"
#include "attnjit/error.hpp"
#include "invalid_argument.hpp"

namespace attnjit::capi {

namespace {

// Each struct's first layout: through its first version's last field (given() accepts no smaller struct_size).
constexpr size_t kWrapperOptionsFirst = offsetof(attnjit_batch_decode_wrapper_options_t, device) + sizeof(int32_t);
constexpr size_t kPlanOptionsFirst = offsetof(attnjit_batch_decode_plan_options_t, rope_theta) + sizeof(float);
constexpr size_t kTrtllmOptionsFirst = offsetof(attnjit_trtllm_decode_options_t, bmm2_scale) + sizeof(float);

DType dtype(DLDataType t, const char* field) {
  const std::optional<DType> d = dlpack::to_dtype(t);
  if (!d)
    invalid(fmt::format("options->{}={} is not supported; allowed: float16, bfloat16, float32, float8_e4m3fn "
                        "(code 10), float8_e5m2 (code 12)",
                        field, dlpack::describe(t)));
  return *d;
}

}  // namespace

WrapperOptions to_wrapper_options(const attnjit_batch_decode_wrapper_options_t* options) {
  WrapperOptions o;
  if (!given(options, kWrapperOptionsFirst, "attnjit_batch_decode_wrapper_options_init")) return o;
  o.kv_layout = kv_layout_field(options->kv_layout);
  o.use_cuda_graph = flag_field(options->use_cuda_graph, "use_cuda_graph");
  o.use_tensor_cores = flag_field(options->use_tensor_cores, "use_tensor_cores");
  if (options->device < 0)
    invalid(fmt::format("options->device={} is not allowed; allowed: a CUDA device ordinal >= 0", options->device));
  o.device = options->device;
  return o;
}

BatchDecodeWithPagedKVCacheWrapper::PlanArgs to_plan_args(const attnjit_batch_decode_plan_options_t* options,
                                                          int num_qo_heads, int num_kv_heads, int head_dim,
                                                          int page_size) {
  BatchDecodeWithPagedKVCacheWrapper::PlanArgs a;
  a.num_qo_heads = num_qo_heads;
  a.num_kv_heads = num_kv_heads;
  a.head_dim = head_dim;
  a.page_size = page_size;
  if (!given(options, kPlanOptionsFirst, "attnjit_batch_decode_plan_options_init")) return a;
  a.pos_encoding_mode = pos_encoding_field(options->pos_encoding_mode);
  a.window_left = window_left_field(options->window_left);
  a.q_data_type = dtype(options->q_data_type, "q_data_type");
  if (options->kv_data_type.bits != 0) a.kv_data_type = dtype(options->kv_data_type, "kv_data_type");
  read_score_fields(*options, a);
  read_variant_field(*options, a);
  return a;
}

TrtllmDecodeArgs to_trtllm_args(const attnjit_trtllm_decode_options_t* options) {
  TrtllmDecodeArgs a;  // kv_layout HND, window -1, shared index, scales 1: TensorRT-LLM's defaults
  if (!given(options, kTrtllmOptionsFirst, "attnjit_trtllm_decode_options_init")) return a;
  a.kv_layout = kv_layout_field(options->kv_layout);
  a.window_left = window_left_field(options->window_left);
  a.uses_shared_paged_kv_idx = flag_field(options->uses_shared_paged_kv_idx, "uses_shared_paged_kv_idx");
  a.use_tensor_cores = flag_field(options->use_tensor_cores, "use_tensor_cores");
  for (auto [value, field] : {std::pair{options->bmm1_scale, "bmm1_scale"}, std::pair{options->bmm2_scale, "bmm2_scale"}})
    if (!std::isfinite(value) || !(value > 0.f))
      invalid(fmt::format("options->{}={} is not allowed; allowed: a finite value > 0 (default 1.0)", field, value));
  a.bmm1_scale = options->bmm1_scale;
  a.bmm2_scale = options->bmm2_scale;
  return a;
}

std::optional<float> optional_positive(float value, const char* name) {
  if (value == 0.0f) return std::nullopt;
  if (!std::isfinite(value) || !(value > 0.f))
    invalid(fmt::format("{}={} is not allowed; allowed: a finite value > 0, or 0 for not provided", name, value));
  return value;
}

}  // namespace attnjit::capi

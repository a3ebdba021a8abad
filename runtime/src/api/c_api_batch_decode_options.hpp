// Batch decode's C options structs → the C++ API's argument structs,
// refusing what the C side can get wrong (struct_size never set by the init
// function, enum values, flags, non-finite floats, dtypes), naming the field.
#pragma once
#include "attnjit/attnjit_batch_decode.h"
#include "attnjit/batch_decode.hpp"

namespace attnjit::capi {

struct WrapperOptions {
  KVLayout kv_layout = KVLayout::NHD;
  bool use_cuda_graph = false, use_tensor_cores = false;
  int device = 0;
};
WrapperOptions to_wrapper_options(const attnjit_batch_decode_wrapper_options_t* options);

// num_qo_heads etc. are the plan function's own parameters; the problem checks their values.
BatchDecodeWithPagedKVCacheWrapper::PlanArgs to_plan_args(const attnjit_batch_decode_plan_options_t* options,
                                                          int num_qo_heads, int num_kv_heads, int head_dim,
                                                          int page_size);

// Everything of TrtllmDecodeArgs but the arrays and max_seq_len, which come from tensors.
TrtllmDecodeArgs to_trtllm_args(const attnjit_trtllm_decode_options_t* options);

// A caller's optional float where 0 means "not provided": nullopt, the value,
// or an error naming `name` when it is not finite or not > 0.
std::optional<float> optional_positive(float value, const char* name);

}  // namespace attnjit::capi

// One-dimensional device arrays that ride beside the attention tensors and
// that the kernels index densely by a known length: TensorRT-LLM's attention
// sinks ([num_qo_heads] float32), its cum_seq_lens_q ([batch + 1] int32) and
// merge_state_in_place's row mask ([seq_len] bytes); and single device values
// the kernels read at run time (TensorRT-LLM's bmm1_scale / bmm2_scale
// tensors). TensorView has neither a bool dtype nor a place for "one entry
// per head", so these are checked here, from the DLTensor, and handed on as
// raw device pointers. Every failure names the argument, its value and what
// is allowed.
#pragma once
#include <cstdint>
#include <vector>

#include "attnjit/attnjit.h"

namespace attnjit::capi {

// What a vector must be. The length and the device come from another
// argument (`owner`), which the messages name: "... with num_qo_heads=8
// from the query", "... differs from the query's device cuda:0".
struct DeviceVectorRule {
  std::vector<DLDataType> dtypes;  // accepted element types (lanes 1)
  const char* allowed_dtypes;      // how the messages spell them, e.g. "float32 (kDLFloat, 32)"
  const char* length_name;         // "num_qo_heads"
  int64_t length;
  const char* owner;               // "the query"
  int device;                      // the owner's CUDA ordinal
};

// The vector's device address (byte_offset applied), after checking that
// `t` is not NULL, is on kDLCUDA and on rule.device, has one of rule.dtypes,
// is 1-D of rule.length elements, has unit stride, and its address is
// aligned to its element size.
const void* device_vector(const DLTensor* t, const char* arg, const DeviceVectorRule& rule);

// Refuses a first element whose address is not a multiple of the element
// size (the kernels load whole elements): "<arg>: address ... is not allowed".
// Every device array the C API hands to a kernel goes through it.
void check_element_alignment(const void* data, unsigned element_bytes, const char* arg);

// One float32 on the device, shape [] or [1] (a torch scalar tensor or a
// one-element one), on `device` -- the device of `owner`, which the messages
// name ("the query"). Returns its address after the checks device_vector makes.
const float* device_float32_scalar(const DLTensor* t, const char* arg, const char* owner, int device);

}  // namespace attnjit::capi

// DLTensors that batch decode takes besides q/out/lse, checked and turned
// into what the C++ API wants: int32 index arrays (host copies or device
// pointers; TensorView has no integer dtypes) and the KV cache, 4-D halves or
// the 5-D single-tensor form. Every failure names the argument, its value and
// what is allowed.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "attnjit/attnjit.h"
#include "attnjit/tensor.hpp"

namespace attnjit::capi {

// A host int32 array (kDLCPU or kDLCUDAHost, 1-D, contiguous), copied.
std::vector<int32_t> host_int32_array(const DLTensor* t, const char* arg);

// A device int32 array on kDLCUDA, contiguous (row-major), its first element
// aligned to 4 bytes. shape[] is returned; the caller checks it against the
// problem. allow_uint32: the array holds lengths, for which uint32
// (TensorRT-LLM's spelling) is the same bits as long as they fit in int32.
struct DeviceInt32 {
  const int32_t* data = nullptr;
  std::vector<int64_t> shape;
  int device = 0;
};
DeviceInt32 device_int32_array(const DLTensor* t, const char* arg, bool allow_uint32 = false);

// k_cache / v_cache as the 4-D views the C++ API takes. v_cache NULL:
// k_cache is [pages, 2, ...] (K at [:, 0], V at [:, 1]), split without a copy,
// or, where allow_one_tensor (TensorRT-LLM's decode, which only reads it),
// [pages, 1, ...]: K and V both that one tensor, as FlashInfer reads it.
std::pair<TensorView, TensorView> kv_cache_views(const DLTensor* k_cache, const DLTensor* v_cache,
                                                 bool allow_one_tensor = false);

}  // namespace attnjit::capi

// A non-owning view of a device tensor: what the C++ API takes. The C API
// and the Python module build these from DLPack DLTensors.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>
#include <optional>
#include <string>

#include "attnjit/export.h"
#include "attnjit/types.hpp"

#include <dlpack/dlpack.h>

struct CUstream_st;

namespace attnjit {

using Stream = CUstream_st*;  // the same type as CUstream / cudaStream_t

struct ATTNJIT_API TensorView {
  static constexpr int kMaxDims = 4;
  void* data = nullptr;
  DType dtype = DType::F16;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // in elements
  int device = 0;                           // CUDA device ordinal

  int64_t numel() const;
  std::string describe() const;  // "bfloat16[32, 128] strides [128, 1] on cuda:0"
};

// Contiguous (row-major) view; handy in tests and examples.
ATTNJIT_API TensorView make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, int device = 0);
// The same from a shape held in a variable (an initializer_list kept in one
// outlives the array behind it).
ATTNJIT_API TensorView make_tensor(void* data, DType dtype, const std::vector<int64_t>& shape, int device = 0);

// Converts a DLTensor (CUDA device memory, supported dtype, ndim <= 4).
// `arg` names the argument in error messages. fp8 arrives either with the
// DLPack 1.1 codes (kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12; see
// attnjit_fp8.h) or as raw bytes with a dtype override, below.
ATTNJIT_API TensorView from_dlpack(const DLTensor* t, const char* arg);

// As above, but the elements are `dtype_override` when given: the DLTensor
// must then be an integer type of the same width (raw bytes, e.g. an fp8
// tensor viewed as uint8 because the producer cannot export fp8) or already
// that dtype. std::nullopt behaves exactly like the two-argument form.
ATTNJIT_API TensorView from_dlpack(const DLTensor* t, const char* arg, std::optional<DType> dtype_override);

}  // namespace attnjit

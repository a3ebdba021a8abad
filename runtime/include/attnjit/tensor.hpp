// A non-owning view of a device tensor: what the C++ API takes. The C API
// and the Python module build these from DLPack DLTensors.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "attnjit/export.h"
#include "attnjit/types.hpp"

struct DLTensor;
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

// Converts a DLTensor (CUDA device memory, supported dtype, ndim <= 4).
// `arg` names the argument in error messages.
ATTNJIT_API TensorView from_dlpack(const DLTensor* t, const char* arg);

}  // namespace attnjit

// A DLTensor that owns its shape and strides arrays, for building the inputs
// a DLPack producer would hand us. The data pointer is a made-up device
// address: CPU tests only validate and convert, they never dereference it.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace attnjit::test {

inline void* fake_device_pointer() { return reinterpret_cast<void*>(uintptr_t{0x7f0000000000}); }

class DLTensorMaker {
 public:
  explicit DLTensorMaker(std::vector<int64_t> shape, DLDataType dtype = {kDLFloat, 16, 1},
                         DLDevice device = {kDLCUDA, 0})
      : shape_(std::move(shape)) {
    t_.data = fake_device_pointer();
    t_.device = device;
    t_.ndim = static_cast<int>(shape_.size());
    t_.dtype = dtype;
  }
  DLTensorMaker& strides(std::vector<int64_t> s) { strides_ = std::move(s); return *this; }
  DLTensorMaker& dtype(DLDataType d) { t_.dtype = d; return *this; }
  DLTensorMaker& device(DLDevice d) { t_.device = d; return *this; }
  DLTensorMaker& ndim(int n) { t_.ndim = n; return *this; }  // to lie about the rank
  DLTensorMaker& data(void* p) { t_.data = p; return *this; }
  DLTensorMaker& byte_offset(uint64_t b) { t_.byte_offset = b; return *this; }
  DLTensorMaker& no_shape() { no_shape_ = true; return *this; }

  // Pointers are refreshed on every call, so copies of a maker stay valid.
  DLTensor* get() {
    t_.shape = no_shape_ ? nullptr : shape_.data();
    t_.strides = strides_.empty() ? nullptr : strides_.data();
    return &t_;
  }

 private:
  std::vector<int64_t> shape_, strides_;
  bool no_shape_ = false;
  DLTensor t_{};
};

constexpr DLDataType kF16{kDLFloat, 16, 1};
constexpr DLDataType kBF16{kDLBfloat, 16, 1};
constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr DLDataType kU8{kDLUInt, 8, 1};
constexpr DLDataType kI8{kDLInt, 8, 1};
constexpr DLDataType kE4M3{10, 8, 1};  // DLPack 1.1 kDLFloat8_e4m3fn
constexpr DLDataType kE5M2{12, 8, 1};  // DLPack 1.1 kDLFloat8_e5m2
constexpr DLDataType kI32{kDLInt, 32, 1};
constexpr DLDataType kI64{kDLInt, 64, 1};
constexpr DLDataType kU16{kDLUInt, 16, 1};
constexpr DLDataType kU32{kDLUInt, 32, 1};
constexpr DLDataType kBool{6, 8, 1};  // DLPack >= 0.8's kDLBool, as torch exports bool

// A host int32 array (kDLCPU) whose values the maker's data pointer refers to.
struct HostInts {
  std::vector<int32_t> values;
  DLTensorMaker t;
  explicit HostInts(std::vector<int32_t> v)
      : values(std::move(v)), t({static_cast<int64_t>(values.size())}, kI32, {kDLCPU, 0}) {
    t.data(values.data());
  }
};

}  // namespace attnjit::test

// RAII device memory for GPU tests, through the same dlopen'ed driver table.
#pragma once
#include <cstdint>
#include <vector>

#include "cuda/driver.hpp"

namespace attnjit::test {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes) ATTNJIT_CU(cuda::driver().MemAlloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_) cuda::driver().MemFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }
  void upload(const std::vector<uint8_t>& host) { ATTNJIT_CU(cuda::driver().MemcpyHtoD(ptr_, host.data(), host.size())); }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> h(bytes_);
    ATTNJIT_CU(cuda::driver().MemcpyDtoH(h.data(), ptr_, bytes_));
    return h;
  }
  // Poison: 0xFF bytes read as NaN in every float format, so unwritten output shows.
  void poison() { std::vector<uint8_t> h(bytes_, 0xFF); upload(h); }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

}  // namespace attnjit::test

// RAII device memory and streams for GPU tests, through the same dlopen'ed driver table.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
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
  // The memory as an array of T (an index array, a scale), for the entry points' pointer arguments.
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(ptr_);
  }
  // Host values (bytes, an index array) to the start of the buffer.
  template <class T>
  void upload(const std::vector<T>& host) {
    ATTNJIT_CU(cuda::driver().MemcpyHtoD(ptr_, host.data(), host.size() * sizeof(T)));
  }
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

// A stream of the test's own (non-blocking: no implicit sync with the legacy stream).
struct NonBlockingStream {
  CUstream s = nullptr;
  NonBlockingStream() { ATTNJIT_CU(cuda::driver().StreamCreate(&s, CU_STREAM_NON_BLOCKING)); }
  ~NonBlockingStream() { cuda::driver().StreamDestroy(s); }
  NonBlockingStream(const NonBlockingStream&) = delete;
  NonBlockingStream& operator=(const NonBlockingStream&) = delete;
};

// An int32 index array on the device (at least 4 bytes, so an empty one is
// still a valid pointer).
inline DeviceBuffer upload_ints(const std::vector<int32_t>& v) {
  DeviceBuffer d(std::max<size_t>(4, v.size() * 4));
  std::vector<uint8_t> bytes(d.bytes(), 0);
  std::memcpy(bytes.data(), v.data(), v.size() * 4);
  d.upload(bytes);
  return d;
}

// A float32 array on the device (at least 4 bytes), from doubles or floats.
template <class T>
DeviceBuffer upload_floats(const std::vector<T>& v) {
  DeviceBuffer d(std::max<size_t>(4, v.size() * 4));
  std::vector<uint8_t> bytes(d.bytes(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = static_cast<float>(v[i]);
    std::memcpy(&bytes[4 * i], &x, 4);
  }
  d.upload(bytes);
  return d;
}

}  // namespace attnjit::test

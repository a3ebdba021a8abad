// The few CUDA driver calls this example needs to own device memory, opened
// with dlopen like attnjit itself does: the program then builds without the
// CUDA toolkit and starts on machines without a GPU driver (where it only
// prewarms). A real engine would use its own allocator (cudaMalloc, torch).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace example {

class DeviceMemory;

class CudaDriver {
 public:
  // Opens libcuda.so.1 and makes device `ordinal`'s primary context current.
  // Throws std::runtime_error with the driver's message on failure.
  explicit CudaDriver(int ordinal);
  uint64_t alloc(size_t bytes) const;
  void free(uint64_t ptr) const noexcept;
  void to_device(uint64_t dst, const void* src, size_t bytes) const;
  void to_host(void* dst, uint64_t src, size_t bytes) const;
  void synchronize() const;

 private:
  void check(int result, const char* call) const;
  void* handle_ = nullptr;
};

// Owning device allocation.
class DeviceMemory {
 public:
  DeviceMemory(const CudaDriver& cu, size_t bytes) : cu_(cu), ptr_(bytes ? cu.alloc(bytes) : 0), bytes_(bytes) {}
  ~DeviceMemory() { if (ptr_) cu_.free(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  uint64_t address() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  const CudaDriver& cu_;
  uint64_t ptr_;
  size_t bytes_;
};

}  // namespace example

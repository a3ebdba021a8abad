#include "cuda_driver.hpp"

#include <dlfcn.h>

#include <stdexcept>

namespace example {

namespace {

// The driver API's ABI, as in cuda.h (CUresult is an int-sized enum,
// CUdeviceptr a 64-bit integer, contexts opaque pointers).
using Init = int (*)(unsigned);
using DeviceGet = int (*)(int*, int);
using PrimaryCtxRetain = int (*)(void**, int);
using CtxSetCurrent = int (*)(void*);
using MemAlloc = int (*)(uint64_t*, size_t);
using MemFree = int (*)(uint64_t);
using MemcpyHtoD = int (*)(uint64_t, const void*, size_t);
using MemcpyDtoH = int (*)(void*, uint64_t, size_t);
using CtxSynchronize = int (*)();
using GetErrorString = int (*)(int, const char**);

template <typename F>
F sym(void* h, const char* name) {
  void* p = dlsym(h, name);
  if (!p) throw std::runtime_error(std::string("libcuda.so.1 has no ") + name);
  return reinterpret_cast<F>(p);
}

}  // namespace

CudaDriver::CudaDriver(int ordinal) {
  handle_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle_) throw std::runtime_error(std::string("cannot open libcuda.so.1: ") + dlerror());
  check(sym<Init>(handle_, "cuInit")(0), "cuInit");
  int dev = 0;
  check(sym<DeviceGet>(handle_, "cuDeviceGet")(&dev, ordinal), "cuDeviceGet");
  void* ctx = nullptr;
  check(sym<PrimaryCtxRetain>(handle_, "cuDevicePrimaryCtxRetain")(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(sym<CtxSetCurrent>(handle_, "cuCtxSetCurrent")(ctx), "cuCtxSetCurrent");
}

void CudaDriver::check(int result, const char* call) const {
  if (result == 0) return;
  const char* text = "unknown error";
  if (auto f = reinterpret_cast<GetErrorString>(dlsym(handle_, "cuGetErrorString"))) f(result, &text);
  throw std::runtime_error(std::string(call) + " failed: " + text);
}

uint64_t CudaDriver::alloc(size_t bytes) const {
  uint64_t p = 0;
  check(sym<MemAlloc>(handle_, "cuMemAlloc_v2")(&p, bytes), "cuMemAlloc");
  return p;
}

void CudaDriver::free(uint64_t ptr) const noexcept {
  if (auto f = reinterpret_cast<MemFree>(dlsym(handle_, "cuMemFree_v2"))) f(ptr);
}

void CudaDriver::to_device(uint64_t dst, const void* src, size_t bytes) const {
  check(sym<MemcpyHtoD>(handle_, "cuMemcpyHtoD_v2")(dst, src, bytes), "cuMemcpyHtoD");
}

void CudaDriver::to_host(void* dst, uint64_t src, size_t bytes) const {
  check(sym<MemcpyDtoH>(handle_, "cuMemcpyDtoH_v2")(dst, src, bytes), "cuMemcpyDtoH");
}

void CudaDriver::synchronize() const { check(sym<CtxSynchronize>(handle_, "cuCtxSynchronize")(), "cuCtxSynchronize"); }

}  // namespace example

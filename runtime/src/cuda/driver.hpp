// The CUDA driver API, opened at run time (dlopen "libcuda.so.1") with every
// entry point resolved through cuGetProcAddress at a fixed CUDA version. No
// CUDA library is linked, so the library loads and compiles on machines with
// no GPU; the first use of a missing driver throws Error(NoDevice) that says so.
#pragma once
#include <cuda.h>

#include <string>

namespace attnjit::cuda {

// Every entry point is resolved at this CUDA version (12.0: the first with
// cuLibrary*/cuKernel*), so each gets the ABI declared below whatever the
// installed driver; driver_table.cpp proves that against cudaTypedefs.h.
// A driver older than 12.0 is reported as such by driver().
constexpr int kDriverApiVersion = 12000;

// The typed table; each member has the signature of the cu* function it is named after.
struct DriverApi {
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuDriverGetVersion) DriverGetVersion = nullptr;
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem) DeviceTotalMem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) DevicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent = nullptr;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&::cuCtxPushCurrent) CtxPushCurrent = nullptr;
  decltype(&::cuCtxPopCurrent) CtxPopCurrent = nullptr;
  decltype(&::cuCtxGetDevice) CtxGetDevice = nullptr;
  decltype(&::cuCtxSynchronize) CtxSynchronize = nullptr;
  decltype(&::cuStreamGetCtx) StreamGetCtx = nullptr;
  decltype(&::cuLibraryLoadData) LibraryLoadData = nullptr;
  decltype(&::cuLibraryUnload) LibraryUnload = nullptr;
  decltype(&::cuLibraryGetKernel) LibraryGetKernel = nullptr;
  decltype(&::cuKernelSetAttribute) KernelSetAttribute = nullptr;
  decltype(&::cuKernelGetAttribute) KernelGetAttribute = nullptr;
  decltype(&::cuKernelGetFunction) KernelGetFunction = nullptr;
  decltype(&::cuLaunchKernelEx) LaunchKernelEx = nullptr;
  decltype(&::cuMemAlloc) MemAlloc = nullptr;
  decltype(&::cuMemFree) MemFree = nullptr;
  decltype(&::cuMemAllocHost) MemAllocHost = nullptr;  // pinned staging of a plan's uploads
  decltype(&::cuMemFreeHost) MemFreeHost = nullptr;
  decltype(&::cuMemGetInfo) MemGetInfo = nullptr;  // tests: memory a graph held is freed
  decltype(&::cuMemHostGetDevicePointer) MemHostGetDevicePointer = nullptr;  // the table-check record (table_check.hpp)
  decltype(&::cuMemcpyHtoD) MemcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) MemcpyDtoH = nullptr;
  decltype(&::cuMemcpyDtoDAsync) MemcpyDtoDAsync = nullptr;
  decltype(&::cuMemcpyHtoDAsync) MemcpyHtoDAsync = nullptr;  // batch decode's plan() uploads its work list
  decltype(&::cuMemsetD8Async) MemsetD8Async = nullptr;
  decltype(&::cuStreamCreate) StreamCreate = nullptr;
  decltype(&::cuStreamDestroy) StreamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) StreamSynchronize = nullptr;
  decltype(&::cuStreamBeginCapture) StreamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) StreamEndCapture = nullptr;
  decltype(&::cuStreamIsCapturing) StreamIsCapturing = nullptr;
  decltype(&::cuThreadExchangeStreamCaptureMode) ThreadExchangeStreamCaptureMode = nullptr;
  // The 12.0 ABI (cuStreamGetCaptureInfo_v2, no edge data); cuda.h's name is the 12.3 form.
  CUresult(CUDAAPI* StreamGetCaptureInfo)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*,
                                          const CUgraphNode**, size_t*) = nullptr;
  // A captured graph keeps a plan's memory alive (PlanMemory::retain_while_captured).
  decltype(&::cuUserObjectCreate) UserObjectCreate = nullptr;
  decltype(&::cuUserObjectRelease) UserObjectRelease = nullptr;
  decltype(&::cuGraphRetainUserObject) GraphRetainUserObject = nullptr;
  decltype(&::cuGraphInstantiate) GraphInstantiate = nullptr;
  decltype(&::cuGraphLaunch) GraphLaunch = nullptr;
  decltype(&::cuGraphExecDestroy) GraphExecDestroy = nullptr;
  decltype(&::cuGraphDestroy) GraphDestroy = nullptr;
  decltype(&::cuEventCreate) EventCreate = nullptr;
  decltype(&::cuEventDestroy) EventDestroy = nullptr;
  decltype(&::cuEventRecord) EventRecord = nullptr;
  decltype(&::cuEventSynchronize) EventSynchronize = nullptr;
  decltype(&::cuEventQuery) EventQuery = nullptr;
  decltype(&::cuEventElapsedTime) EventElapsedTime = nullptr;
  decltype(&::cuTensorMapEncodeTiled) TensorMapEncodeTiled = nullptr;  // TMA maps of the warp-specialized prefill
};

// Loads libcuda once (thread-safe) and calls cuInit(0). Throws Error(NoDevice)
// naming what is missing (the library, an entry point, or a device).
const DriverApi& driver();
// True when libcuda loads and cuInit succeeds; never throws.
bool driver_available() noexcept;
// Why driver_available() is false ("" when it is true).
std::string driver_unavailable_reason();

// Throws Error(CudaError) with the call text, the CUresult name and its description.
void check(CUresult r, const char* call);
#define ATTNJIT_CU(call) ::attnjit::cuda::check((call), #call)

// "sm_90a" for a compute-capability 9.0 device; the "a" suffix on 9.0+ enables
// wgmma/TMA, which is fine because the cubin never leaves this arch.
// Throws Error(InvalidArgument) naming the ordinal and the device count when
// `device` is not a valid ordinal.
std::string arch_of_device(int device);
// The naming rule alone, for a compute capability (testable without a GPU):
// (9,0) -> "sm_90a", (10,0) -> "sm_100a", (8,6) -> "sm_86".
std::string arch_for_compute_capability(int major, int minor);

// Makes the device's primary context current for the scope, restoring the caller's after.
// If the calling thread's current context is already on `device` (e.g. PyTorch's),
// it is left alone. Primary contexts are retained once per device and kept for
// the life of the process.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  bool pushed_ = false;
};

// For a destructor of device or pinned memory: launches already enqueued (on
// any stream) may still use it, so `release` runs once `device` is idle.
// Reports nothing: the process may be exiting.
template <class Release>
void release_when_idle(int device, Release&& release) noexcept {
  try {
    ScopedDevice scope(device);
    driver().CtxSynchronize();
    release();
  } catch (...) {
  }
}

}  // namespace attnjit::cuda

// Why a fixed version: cuGetProcAddress(name, version) returns the newest ABI
// of `name` introduced at or before `version`. Asking for "the driver's
// version" would silently hand back a different signature whenever NVIDIA
// revises a function (13.0 gave cuCtxGetDevice and cuCtxSynchronize a context
// argument, 12.5 gave cuStreamGetCtx a green-context argument). 12.0 is the
// oldest version with everything we use (cuLibrary*, cuKernel*), and the
// static_asserts below prove, against cudaTypedefs.h, that the ABI each name
// has at 12.0 is exactly the prototype DriverApi declares.
#include "cuda/driver_table.hpp"

#include <cudaTypedefs.h>
#include <fmt/format.h>

#include <type_traits>

#include "cuda/dl.hpp"

namespace attnjit::cuda {

namespace {

// ---- ABI proofs: DriverApi member == PFN typedef of the ABI current at 12.0 ----
#define ATTNJIT_ABI_AT_12000(member, pfn) \
  static_assert(std::is_same_v<decltype(DriverApi::member), pfn>, \
                "DriverApi::" #member " does not match the ABI cuGetProcAddress returns at 12000")
ATTNJIT_ABI_AT_12000(Init, PFN_cuInit_v2000);
ATTNJIT_ABI_AT_12000(DriverGetVersion, PFN_cuDriverGetVersion_v2020);
ATTNJIT_ABI_AT_12000(GetErrorName, PFN_cuGetErrorName_v6000);
ATTNJIT_ABI_AT_12000(GetErrorString, PFN_cuGetErrorString_v6000);
ATTNJIT_ABI_AT_12000(DeviceGetCount, PFN_cuDeviceGetCount_v2000);
ATTNJIT_ABI_AT_12000(DeviceGet, PFN_cuDeviceGet_v2000);
ATTNJIT_ABI_AT_12000(DeviceGetName, PFN_cuDeviceGetName_v2000);
ATTNJIT_ABI_AT_12000(DeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000);
ATTNJIT_ABI_AT_12000(DeviceTotalMem, PFN_cuDeviceTotalMem_v3020);              // = cuDeviceTotalMem_v2
ATTNJIT_ABI_AT_12000(DevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000);
ATTNJIT_ABI_AT_12000(DevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000);  // = _v2
ATTNJIT_ABI_AT_12000(CtxGetCurrent, PFN_cuCtxGetCurrent_v4000);
ATTNJIT_ABI_AT_12000(CtxSetCurrent, PFN_cuCtxSetCurrent_v4000);
ATTNJIT_ABI_AT_12000(CtxPushCurrent, PFN_cuCtxPushCurrent_v4000);              // = _v2
ATTNJIT_ABI_AT_12000(CtxPopCurrent, PFN_cuCtxPopCurrent_v4000);                // = _v2
// At 13000 these two would be the new (…, CUcontext) forms (cuCtxGetDevice_v2,
// cuCtxSynchronize_v2); cuda.h's plain names still declare the 12.0 forms.
ATTNJIT_ABI_AT_12000(CtxGetDevice, PFN_cuCtxGetDevice_v2000);
ATTNJIT_ABI_AT_12000(CtxSynchronize, PFN_cuCtxSynchronize_v2000);
// At 12050+ this would be cuStreamGetCtx_v2 (extra CUgreenCtx* out-parameter).
ATTNJIT_ABI_AT_12000(StreamGetCtx, PFN_cuStreamGetCtx_v9020);
ATTNJIT_ABI_AT_12000(LibraryLoadData, PFN_cuLibraryLoadData_v12000);
ATTNJIT_ABI_AT_12000(LibraryUnload, PFN_cuLibraryUnload_v12000);
ATTNJIT_ABI_AT_12000(LibraryGetKernel, PFN_cuLibraryGetKernel_v12000);
ATTNJIT_ABI_AT_12000(KernelSetAttribute, PFN_cuKernelSetAttribute_v12000);
ATTNJIT_ABI_AT_12000(KernelGetAttribute, PFN_cuKernelGetAttribute_v12000);
ATTNJIT_ABI_AT_12000(KernelGetFunction, PFN_cuKernelGetFunction_v12000);
ATTNJIT_ABI_AT_12000(LaunchKernelEx, PFN_cuLaunchKernelEx_v11060);
ATTNJIT_ABI_AT_12000(MemAlloc, PFN_cuMemAlloc_v3020);                          // = cuMemAlloc_v2
ATTNJIT_ABI_AT_12000(MemFree, PFN_cuMemFree_v3020);                            // = cuMemFree_v2
ATTNJIT_ABI_AT_12000(MemAllocHost, PFN_cuMemAllocHost_v3020);                  // = cuMemAllocHost_v2
ATTNJIT_ABI_AT_12000(MemFreeHost, PFN_cuMemFreeHost_v2000);
ATTNJIT_ABI_AT_12000(MemGetInfo, PFN_cuMemGetInfo_v3020);                      // = cuMemGetInfo_v2
ATTNJIT_ABI_AT_12000(MemHostGetDevicePointer, PFN_cuMemHostGetDevicePointer_v3020);  // = _v2
ATTNJIT_ABI_AT_12000(MemcpyHtoD, PFN_cuMemcpyHtoD_v3020);                      // = _v2
ATTNJIT_ABI_AT_12000(MemcpyDtoH, PFN_cuMemcpyDtoH_v3020);                      // = _v2
ATTNJIT_ABI_AT_12000(MemcpyDtoDAsync, PFN_cuMemcpyDtoDAsync_v3020);            // = _v2
ATTNJIT_ABI_AT_12000(MemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020);            // = _v2
ATTNJIT_ABI_AT_12000(MemsetD8Async, PFN_cuMemsetD8Async_v3020);
ATTNJIT_ABI_AT_12000(StreamCreate, PFN_cuStreamCreate_v2000);
ATTNJIT_ABI_AT_12000(StreamDestroy, PFN_cuStreamDestroy_v4000);                // = _v2
ATTNJIT_ABI_AT_12000(StreamSynchronize, PFN_cuStreamSynchronize_v2000);
ATTNJIT_ABI_AT_12000(StreamBeginCapture, PFN_cuStreamBeginCapture_v10010);    // = _v2 (with mode)
ATTNJIT_ABI_AT_12000(StreamEndCapture, PFN_cuStreamEndCapture_v10000);
ATTNJIT_ABI_AT_12000(StreamIsCapturing, PFN_cuStreamIsCapturing_v10000);
ATTNJIT_ABI_AT_12000(ThreadExchangeStreamCaptureMode, PFN_cuThreadExchangeStreamCaptureMode_v10010);
// cuda.h maps the name to cuStreamGetCaptureInfo_v3 (12.3, edge data); at 12.0 it is _v2.
ATTNJIT_ABI_AT_12000(StreamGetCaptureInfo, PFN_cuStreamGetCaptureInfo_v11030);
ATTNJIT_ABI_AT_12000(UserObjectCreate, PFN_cuUserObjectCreate_v11030);
ATTNJIT_ABI_AT_12000(UserObjectRelease, PFN_cuUserObjectRelease_v11030);
ATTNJIT_ABI_AT_12000(GraphRetainUserObject, PFN_cuGraphRetainUserObject_v11030);
// cuda.h maps cuGraphInstantiate to cuGraphInstantiateWithFlags; we ask for that name.
ATTNJIT_ABI_AT_12000(GraphInstantiate, PFN_cuGraphInstantiateWithFlags_v11040);
ATTNJIT_ABI_AT_12000(GraphLaunch, PFN_cuGraphLaunch_v10000);
ATTNJIT_ABI_AT_12000(GraphExecDestroy, PFN_cuGraphExecDestroy_v10000);
ATTNJIT_ABI_AT_12000(GraphDestroy, PFN_cuGraphDestroy_v10000);
ATTNJIT_ABI_AT_12000(EventCreate, PFN_cuEventCreate_v2000);
ATTNJIT_ABI_AT_12000(EventDestroy, PFN_cuEventDestroy_v4000);                  // = _v2
ATTNJIT_ABI_AT_12000(EventRecord, PFN_cuEventRecord_v2000);
ATTNJIT_ABI_AT_12000(EventSynchronize, PFN_cuEventSynchronize_v2000);
ATTNJIT_ABI_AT_12000(EventQuery, PFN_cuEventQuery_v2000);
// cuda.h maps the name to cuEventElapsedTime_v2 (12.8); its ABI is identical, so
// the 12.0 entry point is a correct value for this member.
ATTNJIT_ABI_AT_12000(EventElapsedTime, PFN_cuEventElapsedTime_v2000);
ATTNJIT_ABI_AT_12000(TensorMapEncodeTiled, PFN_cuTensorMapEncodeTiled_v12000);
#undef ATTNJIT_ABI_AT_12000

using GetProcV2 = PFN_cuGetProcAddress_v12000;  // (…, CUdriverProcAddressQueryResult*)
using GetProcV1 = PFN_cuGetProcAddress_v11030;  // drivers that do not export _v2

// Legacy-stream entry points: we are built without per-thread default stream,
// so stream 0 must mean what it means to the caller (PyTorch's legacy stream).
constexpr cuuint64_t kFlags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;

class Resolver {
 public:
  GetProcV2 v2 = nullptr;
  GetProcV1 v1 = nullptr;

  // nullptr and *error set when the driver has no ABI of `name` at `version`.
  void* get(const char* name, int version, std::string* error) const {
    void* fn = nullptr;
    CUresult r;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
    if (v2) r = v2(name, &fn, version, kFlags, &found);
    else r = v1(name, &fn, version, kFlags);
    if (r == CUDA_SUCCESS && fn && found == CU_GET_PROC_ADDRESS_SUCCESS) return fn;
    if (found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
      *error = fmt::format("libcuda.so.1 has {} but not at the CUDA {}.{} ABI attnjit was built for",
                           name, version / 1000, version % 1000 / 10);
    else
      *error = fmt::format("libcuda.so.1 has no entry point {} (cuGetProcAddress returned CUresult {})",
                           name, static_cast<int>(r));
    return nullptr;
  }
};

// cuGetProcAddress answers CUDA_ERROR_INVALID_VALUE for a version newer than the
// driver, so on failure we ask the driver what it supports to say so plainly.
std::string explain_old_driver(const Resolver& r, const std::string& first_error) {
  std::string ignored;
  auto get_version = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(r.get("cuDriverGetVersion", 2020, &ignored));
  int v = 0;
  if (get_version && get_version(&v) == CUDA_SUCCESS && v > 0 && v < kDriverApiVersion)
    return fmt::format("the NVIDIA driver supports CUDA {}.{}, but attnjit needs a driver for CUDA {}.{} or newer "
                       "(cuLibrary*/cuKernel* entry points); update the driver",
                       v / 1000, v % 1000 / 10, kDriverApiVersion / 1000, kDriverApiVersion % 1000 / 10);
  return first_error;
}

template <typename Fn>
bool resolve(const Resolver& r, const char* name, Fn& slot, std::string* error) {
  slot = reinterpret_cast<Fn>(r.get(name, kDriverApiVersion, error));
  return slot != nullptr;
}

}  // namespace

std::string resolve_driver_api(void* libcuda, DriverApi& api) {
  Resolver r;
  std::string error;
  // Only cuGetProcAddress comes from dlsym; everything else is versioned through it.
  r.v2 = reinterpret_cast<GetProcV2>(dl::symbol(libcuda, "cuGetProcAddress_v2", &error));
  if (!r.v2) {
    std::string error_v1;
    r.v1 = reinterpret_cast<GetProcV1>(dl::symbol(libcuda, "cuGetProcAddress", &error_v1));
    if (!r.v1)
      return fmt::format("libcuda.so.1 exports neither cuGetProcAddress_v2 ({}) nor cuGetProcAddress ({}); "
                         "the NVIDIA driver is too old (CUDA 12.0 or newer is needed)",
                         error, error_v1);
  }

  // The first lookup doubles as the version probe (see explain_old_driver).
  if (!resolve(r, "cuInit", api.Init, &error)) return explain_old_driver(r, error);

  const bool ok =
      resolve(r, "cuDriverGetVersion", api.DriverGetVersion, &error) &&
      resolve(r, "cuGetErrorName", api.GetErrorName, &error) &&
      resolve(r, "cuGetErrorString", api.GetErrorString, &error) &&
      resolve(r, "cuDeviceGetCount", api.DeviceGetCount, &error) &&
      resolve(r, "cuDeviceGet", api.DeviceGet, &error) &&
      resolve(r, "cuDeviceGetName", api.DeviceGetName, &error) &&
      resolve(r, "cuDeviceGetAttribute", api.DeviceGetAttribute, &error) &&
      resolve(r, "cuDeviceTotalMem", api.DeviceTotalMem, &error) &&
      resolve(r, "cuDevicePrimaryCtxRetain", api.DevicePrimaryCtxRetain, &error) &&
      resolve(r, "cuDevicePrimaryCtxRelease", api.DevicePrimaryCtxRelease, &error) &&
      resolve(r, "cuCtxGetCurrent", api.CtxGetCurrent, &error) &&
      resolve(r, "cuCtxSetCurrent", api.CtxSetCurrent, &error) &&
      resolve(r, "cuCtxPushCurrent", api.CtxPushCurrent, &error) &&
      resolve(r, "cuCtxPopCurrent", api.CtxPopCurrent, &error) &&
      resolve(r, "cuCtxGetDevice", api.CtxGetDevice, &error) &&
      resolve(r, "cuCtxSynchronize", api.CtxSynchronize, &error) &&
      resolve(r, "cuStreamGetCtx", api.StreamGetCtx, &error) &&
      resolve(r, "cuLibraryLoadData", api.LibraryLoadData, &error) &&
      resolve(r, "cuLibraryUnload", api.LibraryUnload, &error) &&
      resolve(r, "cuLibraryGetKernel", api.LibraryGetKernel, &error) &&
      resolve(r, "cuKernelSetAttribute", api.KernelSetAttribute, &error) &&
      resolve(r, "cuKernelGetAttribute", api.KernelGetAttribute, &error) &&
      resolve(r, "cuKernelGetFunction", api.KernelGetFunction, &error) &&
      resolve(r, "cuLaunchKernelEx", api.LaunchKernelEx, &error) &&
      resolve(r, "cuMemAlloc", api.MemAlloc, &error) &&
      resolve(r, "cuMemFree", api.MemFree, &error) &&
      resolve(r, "cuMemAllocHost", api.MemAllocHost, &error) &&
      resolve(r, "cuMemFreeHost", api.MemFreeHost, &error) &&
      resolve(r, "cuMemGetInfo", api.MemGetInfo, &error) &&
      resolve(r, "cuMemHostGetDevicePointer", api.MemHostGetDevicePointer, &error) &&
      resolve(r, "cuMemcpyHtoD", api.MemcpyHtoD, &error) &&
      resolve(r, "cuMemcpyDtoH", api.MemcpyDtoH, &error) &&
      resolve(r, "cuMemcpyDtoDAsync", api.MemcpyDtoDAsync, &error) &&
      resolve(r, "cuMemcpyHtoDAsync", api.MemcpyHtoDAsync, &error) &&
      resolve(r, "cuMemsetD8Async", api.MemsetD8Async, &error) &&
      resolve(r, "cuStreamCreate", api.StreamCreate, &error) &&
      resolve(r, "cuStreamDestroy", api.StreamDestroy, &error) &&
      resolve(r, "cuStreamSynchronize", api.StreamSynchronize, &error) &&
      resolve(r, "cuStreamBeginCapture", api.StreamBeginCapture, &error) &&
      resolve(r, "cuStreamEndCapture", api.StreamEndCapture, &error) &&
      resolve(r, "cuStreamIsCapturing", api.StreamIsCapturing, &error) &&
      resolve(r, "cuThreadExchangeStreamCaptureMode", api.ThreadExchangeStreamCaptureMode, &error) &&
      resolve(r, "cuStreamGetCaptureInfo", api.StreamGetCaptureInfo, &error) &&
      resolve(r, "cuUserObjectCreate", api.UserObjectCreate, &error) &&
      resolve(r, "cuUserObjectRelease", api.UserObjectRelease, &error) &&
      resolve(r, "cuGraphRetainUserObject", api.GraphRetainUserObject, &error) &&
      resolve(r, "cuGraphInstantiateWithFlags", api.GraphInstantiate, &error) &&
      resolve(r, "cuGraphLaunch", api.GraphLaunch, &error) &&
      resolve(r, "cuGraphExecDestroy", api.GraphExecDestroy, &error) &&
      resolve(r, "cuGraphDestroy", api.GraphDestroy, &error) &&
      resolve(r, "cuEventCreate", api.EventCreate, &error) &&
      resolve(r, "cuEventDestroy", api.EventDestroy, &error) &&
      resolve(r, "cuEventRecord", api.EventRecord, &error) &&
      resolve(r, "cuEventSynchronize", api.EventSynchronize, &error) &&
      resolve(r, "cuEventQuery", api.EventQuery, &error) &&
      resolve(r, "cuEventElapsedTime", api.EventElapsedTime, &error) &&
      resolve(r, "cuTensorMapEncodeTiled", api.TensorMapEncodeTiled, &error);
  return ok ? std::string() : error;
}

}  // namespace attnjit::cuda

// Devices: arch naming, ordinal checks, and primary contexts.
#include <fmt/format.h>

#include <mutex>
#include <vector>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"

namespace attnjit::cuda {

namespace {

// Validates the ordinal before any per-device call, so a bad index is an
// InvalidArgument that says what would have been valid, not a CUDA error.
CUdevice device_handle(int device) {
  const DriverApi& api = driver();
  int count = 0;
  ATTNJIT_CU(api.DeviceGetCount(&count));
  if (device < 0 || device >= count)
    throw Error(Status::InvalidArgument,
                count == 0 ? fmt::format("device={} is not a CUDA device ordinal: the driver reports no CUDA devices",
                                         device)
                           : fmt::format("device={} is not a CUDA device ordinal: this machine has {} device{} "
                                         "(valid: 0..{})",
                                         device, count, count == 1 ? "" : "s", count - 1));
  CUdevice d = 0;
  ATTNJIT_CU(api.DeviceGet(&d, device));
  return d;
}

// Primary contexts are retained once per device and never released: releasing
// the last reference would tear down the context (and every kernel loaded into
// it) while the caller, e.g. PyTorch, may still be using it.
CUcontext primary_context(int device, CUdevice handle) {
  static std::mutex mutex;
  static std::vector<CUcontext> table;
  std::lock_guard<std::mutex> lock(mutex);
  if (table.size() <= static_cast<size_t>(device)) table.resize(device + 1, nullptr);
  if (!table[device]) ATTNJIT_CU(driver().DevicePrimaryCtxRetain(&table[device], handle));
  return table[device];
}

}  // namespace

std::string arch_for_compute_capability(int major, int minor) {
  // From 9.0 on, the arch-specific target ("a") unlocks wgmma, TMA and
  // setmaxnreg; a cubin for sm_90a runs only on 9.0, which is all we need
  // because every cubin is compiled for (and cached under) one device's arch.
  return fmt::format("sm_{}{}{}", major, minor, major >= 9 ? "a" : "");
}

std::string arch_of_device(int device) {
  const DriverApi& api = driver();
  const CUdevice d = device_handle(device);
  int major = 0, minor = 0;
  ATTNJIT_CU(api.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
  ATTNJIT_CU(api.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d));
  return arch_for_compute_capability(major, minor);
}

ScopedDevice::ScopedDevice(int device) {
  const DriverApi& api = driver();
  const CUdevice want = device_handle(device);
  CUcontext current = nullptr;
  ATTNJIT_CU(api.CtxGetCurrent(&current));
  if (current) {
    CUdevice have = 0;
    // The caller's context is on the right device: use it as is, so we never
    // swap a framework's context out from under it.
    if (api.CtxGetDevice(&have) == CUDA_SUCCESS && have == want) return;
  }
  ATTNJIT_CU(api.CtxPushCurrent(primary_context(device, want)));
  pushed_ = true;
}

ScopedDevice::~ScopedDevice() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  // pushed_ implies the driver loaded, so driver() cannot throw here. A failed
  // pop has nothing useful to report from a destructor.
  driver().CtxPopCurrent(&popped);
}

}  // namespace attnjit::cuda

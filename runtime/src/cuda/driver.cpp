// Loading libcuda.so.1 once per process, and turning CUresults into Errors.
#include "cuda/driver.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "cuda/dl.hpp"
#include "cuda/driver_table.hpp"
#include "log.hpp"

namespace attnjit::cuda {

namespace {

struct DriverState {
  DriverApi api;
  std::string error;  // "" when api is usable
};

DriverState load_driver() {
  DriverState s;
  std::string why;
  void* lib = dl::open("libcuda.so.1", &why);
  if (!lib) {
    s.error = fmt::format(
        "libcuda.so.1 could not be loaded ({}): no NVIDIA driver on this machine; attnjit can still plan "
        "and compile (prewarm) for a named arch, but cannot launch",
        why);
    return s;
  }
  s.error = resolve_driver_api(lib, s.api);
  if (!s.error.empty()) return s;

  const CUresult r = s.api.Init(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    s.api.GetErrorName(r, &name);
    s.api.GetErrorString(r, &text);
    s.error = fmt::format(
        "cuInit(0) failed with {} ({}): the NVIDIA driver is installed but unusable here (no device visible "
        "to this process, or a driver/kernel-module mismatch); attnjit can still plan and compile (prewarm) "
        "for a named arch, but cannot launch",
        name ? name : fmt::format("CUresult {}", static_cast<int>(r)), text ? text : "no description");
    return s;
  }
  int version = 0;
  s.api.DriverGetVersion(&version);
  log::debug("CUDA driver loaded from {} (supports CUDA {}.{}; entry points at {}.{})", dl::path_of(lib),
             version / 1000, version % 1000 / 10, kDriverApiVersion / 1000, kDriverApiVersion % 1000 / 10);
  return s;
}

// A function-local static: initialized exactly once even when many threads
// race to the first launch (C++11 magic statics), and the outcome, success or
// the reason for failure, is remembered rather than retried on every call.
const DriverState& state() {
  static const DriverState s = load_driver();
  return s;
}

}  // namespace

const DriverApi& driver() {
  const DriverState& s = state();
  if (!s.error.empty()) throw Error(Status::NoDevice, s.error);
  return s.api;
}

bool driver_available() noexcept {
  try {
    return state().error.empty();
  } catch (...) {  // only bad_alloc while formatting; still "not available"
    return false;
  }
}

std::string driver_unavailable_reason() { return state().error; }

void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  // A CUresult can only come from a loaded driver, but stay safe if misused.
  if (driver_available()) {
    state().api.GetErrorName(r, &name);
    state().api.GetErrorString(r, &text);
  }
  throw Error(Status::CudaError,
              fmt::format("{} failed: {} = {} ({})", call, name ? name : "CUresult", static_cast<int>(r),
                          text ? text : "no description"));
}

}  // namespace attnjit::cuda

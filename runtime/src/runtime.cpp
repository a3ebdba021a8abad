#include "attnjit/runtime.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"

#include "cuda/driver.hpp"
#include "cuda/nvrtc.hpp"
#include "engine.hpp"

namespace attnjit {

Runtime::Runtime() : Runtime(Config::from_env()) {}
Runtime::Runtime(Config config) : engine_(std::make_unique<detail::Engine>(std::move(config))) {}
Runtime::~Runtime() = default;

const Config& Runtime::config() const { return engine_->config(); }
detail::Engine& Runtime::engine() const { return *engine_; }

void Runtime::check(int device) const {
  if (device < 0)
    throw Error(Status::InvalidArgument,
                fmt::format("device={} is not allowed; allowed: a CUDA device ordinal (>= 0)", device));
  if (cuda::driver_available()) engine_->arch_of(device);  // names a device that does not exist
  engine_->table_check(device).check("a call before check()");
}

std::string Runtime::default_arch() const {
  if (cuda::driver_available()) {
    int n = 0;
    if (cuda::driver().DeviceGetCount(&n) == CUDA_SUCCESS && n > 0) return engine_->arch_of(0);
  }
  return "sm_90a";
}

RuntimeInfo Runtime::info() const {
  RuntimeInfo info;
  info.version = ATTNJIT_VERSION_STRING;
  try {
    const auto& nv = cuda::nvrtc_info(config().nvrtc_library);
    info.nvrtc_library = nv.library;
    info.nvrtc_version = nv.version();
  } catch (const std::exception& e) {
    info.nvrtc_error = e.what();
  }
  if (cuda::driver_available()) {
    const auto& cu = cuda::driver();
    cu.DriverGetVersion(&info.driver_version);
    int n = 0;
    cu.DeviceGetCount(&n);
    for (int i = 0; i < n; ++i) {
      DeviceInfo d;
      d.ordinal = i;
      CUdevice dev;
      if (cu.DeviceGet(&dev, i) != CUDA_SUCCESS) continue;
      char name[256] = {};
      cu.DeviceGetName(name, sizeof name, dev);
      d.name = name;
      d.arch = engine_->arch_of(i);
      d.sm_count = engine_->sm_count(i);
      cu.DeviceTotalMem(&d.total_memory, dev);
      info.devices.push_back(d);
    }
  } else {
    info.driver_error = cuda::driver_unavailable_reason();
  }
  info.cache = config().cache;
  info.cache_writable = engine_->disk_cache().writable();
  return info;
}

}  // namespace attnjit

// The Runtime: configuration, the kernel cache (memory and disk) and the
// devices. One per process is typical; it is thread-safe.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attnjit/config.hpp"
#include "attnjit/export.h"

namespace attnjit {

namespace detail { class Engine; }

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string arch;       // "sm_90a"
  int sm_count = 0;
  size_t total_memory = 0;
};

struct RuntimeInfo {
  std::string version;              // library version
  std::string nvrtc_library, nvrtc_version;  // empty when NVRTC does not load (reason in nvrtc_error)
  std::string nvrtc_error;
  int driver_version = 0;           // 0 when libcuda does not load (reason in driver_error)
  std::string driver_error;
  std::vector<DeviceInfo> devices;
  CacheConfig cache;
  bool cache_writable = false;
};

class ATTNJIT_API Runtime {
 public:
  Runtime();                        // Config::from_env()
  explicit Runtime(Config config);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Config& config() const;
  RuntimeInfo info() const;
  // The arch to compile for when no device is named: the first GPU's, else "sm_90a".
  std::string default_arch() const;
  // Waits for `device`, then raises Error(InvalidArgument) naming a bad
  // device-table entry (a page id past the cache, a length past the maximum)
  // that a one-call entry point on it met since the last report:
  // TensorRT-LLM's and cuDNN's batch decode and append_paged_kv_cache, each
  // of which also raises one at its start without waiting.
  void check(int device) const;

  detail::Engine& engine() const;  // internal; used by the operators

 private:
  std::unique_ptr<detail::Engine> engine_;
};

}  // namespace attnjit

// Errors thrown by the C++ API. Every message names the offending argument,
// its value and what is allowed, so a caller can act on it without a debugger.
#pragma once
#include <stdexcept>
#include <string>

#include "attnjit/export.h"

namespace attnjit {

// Stable codes, shared with the C API's attnjit_status_t (same numbering).
enum class Status : int {
  Ok = 0,
  InvalidArgument = 1,   // a shape, dtype, layout or option the op does not support
  Unsupported = 2,       // valid request, but not built for this head_dim / arch / dtype
  NoDevice = 3,          // a launch needs a GPU and libcuda or a device is missing
  CudaError = 4,         // a driver call failed
  CompileError = 5,      // NVRTC rejected generated code (message carries the log)
  CacheError = 6,        // the on-disk cache failed in a way that cannot degrade
  CacheMiss = 7,         // cache mode `require` and the kernel is not cached
  NotPlanned = 8,        // run() before plan(), or with inputs that do not match the plan
  WorkspaceTooSmall = 9, // caller's workspace is smaller than the plan needs
  Internal = 10,
};

ATTNJIT_API const char* status_name(Status s) noexcept;

class ATTNJIT_API Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

}  // namespace attnjit

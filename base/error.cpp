#include "attnjit/error.hpp"

namespace attnjit {

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::InvalidArgument: return "invalid argument";
    case Status::Unsupported: return "unsupported";
    case Status::NoDevice: return "no CUDA device or driver";
    case Status::CudaError: return "CUDA driver error";
    case Status::CompileError: return "NVRTC compile error";
    case Status::CacheError: return "kernel cache error";
    case Status::CacheMiss: return "kernel not in cache (cache mode 'require')";
    case Status::NotPlanned: return "inputs do not match the plan";
    case Status::WorkspaceTooSmall: return "workspace too small";
    case Status::Internal: return "internal error";
  }
  return "unknown status";
}

}  // namespace attnjit

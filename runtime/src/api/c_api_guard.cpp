#include "api/c_api_guard.hpp"

#include <fmt/format.h>

namespace attnjit::capi {

namespace {
thread_local std::string t_message;
// Set instead of t_message when copying a message failed for lack of memory,
// so a failure never reads as "" to the caller.
thread_local const char* t_static_message = nullptr;
}  // namespace

const char* last_error() noexcept { return t_static_message ? t_static_message : t_message.c_str(); }

attnjit_status_t fail(attnjit_status_t status, const char* message) noexcept {
  try {
    t_message = message ? message : "";
    t_static_message = nullptr;
  } catch (...) {
    t_static_message = "out of host memory (while recording an error message)";
  }
  return status;
}

void require_non_null(const void* p, const char* function, const char* param, const char* expected) {
  if (p == nullptr)
    throw Error(Status::InvalidArgument, fmt::format("{}: {} is NULL; expected {}", function, param, expected));
}

}  // namespace attnjit::capi

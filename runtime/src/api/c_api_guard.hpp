// The exception boundary of the C API. Every entry point runs its body in
// guard(): attnjit::Error becomes its own status code, anything else becomes
// ATTNJIT_ERROR_INTERNAL, and the message is kept for attnjit_last_error().
//
// Last-error semantics (errno-like): a failure overwrites this thread's
// message; a success leaves it alone. So attnjit_last_error() describes the
// most recent failure on the calling thread, not necessarily the last call.
#pragma once
#include <exception>
#include <new>
#include <string>

#include "attnjit/attnjit.h"
#include "attnjit/error.hpp"

namespace attnjit::capi {

// This thread's last failure message ("" before the first failure). Valid
// until this thread's next failure.
const char* last_error() noexcept;
// Records `message` and returns `status`; never throws (an allocation failure
// while copying the message records a fixed text instead).
attnjit_status_t fail(attnjit_status_t status, const char* message) noexcept;

template <typename Body>
attnjit_status_t guard(Body&& body) noexcept {
  try {
    body();
    return ATTNJIT_OK;
  } catch (const Error& e) {
    // An Error carrying Ok would read as success to the caller; treat it as a bug.
    const auto code = e.status() == Status::Ok ? ATTNJIT_ERROR_INTERNAL : static_cast<attnjit_status_t>(e.status());
    return fail(code, e.what());
  } catch (const std::bad_alloc&) {
    return fail(ATTNJIT_ERROR_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return fail(ATTNJIT_ERROR_INTERNAL, (std::string("internal error: ") + e.what()).c_str());
  } catch (...) {
    return fail(ATTNJIT_ERROR_INTERNAL, "internal error: an exception of unknown type");
  }
}

// Throws Error(InvalidArgument) "<function>: <param> is NULL; <expected>" when p is null.
void require_non_null(const void* p, const char* function, const char* param, const char* expected);

}  // namespace attnjit::capi

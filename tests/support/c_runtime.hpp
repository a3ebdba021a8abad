// The C API's runtime handle for a test's scope, the last error as a
// std::string for Catch2's matchers, and the check that a call was refused.
#pragma once
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "attnjit/attnjit.h"

namespace attnjit::test {

struct CRuntime {
  attnjit_runtime_t* rt = nullptr;
  CRuntime() {
    INFO(attnjit_last_error());
    REQUIRE(attnjit_runtime_create(&rt) == ATTNJIT_OK);
    REQUIRE(rt != nullptr);
  }
  ~CRuntime() { attnjit_runtime_destroy(rt); }
  CRuntime(const CRuntime&) = delete;
  CRuntime& operator=(const CRuntime&) = delete;
};

inline std::string c_last_error() { return attnjit_last_error(); }

// An options struct as its init function leaves it over `fill` bytes (so a
// field it does not set shows), its struct_size CHECKed. `init` takes the
// struct's address (a lambda: the init functions are macros over _sized ones).
template <class Options, class Init>
Options initialized(Init init, unsigned char fill = 0x7f) {
  Options o;
  std::memset(&o, fill, sizeof o);
  init(&o);
  CHECK(o.struct_size == sizeof o);
  return o;
}

// A C call refused: its status `want`, and the last error as `message` says
// (a Catch2 string matcher: Equals or Contains).
template <class Matcher>
void expect_refused(attnjit_status_t got, const Matcher& message, attnjit_status_t want = ATTNJIT_ERROR_INVALID_ARGUMENT) {
  CHECK(got == want);
  CHECK_THAT(c_last_error(), message);
}

}  // namespace attnjit::test

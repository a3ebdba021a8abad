// The C API's runtime handle for a test's scope, and the last error as a
// std::string for Catch2's matchers.
#pragma once
#include <catch2/catch.hpp>

#include <string>

#include "attnjit/attnjit.h"

namespace attnjit::test {

struct CRuntime {
  attnjit_runtime_t* rt = nullptr;
  CRuntime() {
    INFO(attnjit_last_error());
    REQUIRE(attnjit_runtime_create(&rt) == ATTNJIT_OK);
  }
  ~CRuntime() { attnjit_runtime_destroy(rt); }
  CRuntime(const CRuntime&) = delete;
  CRuntime& operator=(const CRuntime&) = delete;
};

inline std::string c_last_error() { return attnjit_last_error(); }

}  // namespace attnjit::test

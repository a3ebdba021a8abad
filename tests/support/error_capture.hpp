// Runs a callable that must throw attnjit::Error with a given status and
// returns the message, so tests can check what the message names.
#pragma once
#include <catch2/catch.hpp>

#include <string>

#include "attnjit/error.hpp"

namespace attnjit::test {

template <typename F>
std::string error_of(F&& f, Status status) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.status() == status);
    return e.what();
  }
  FAIL("expected attnjit::Error(" << status_name(status) << ")");
  return {};
}

}  // namespace attnjit::test

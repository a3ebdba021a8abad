// An engine whose disk cache lives in a temporary folder removed with it:
// for tests that compile through the whole path (codegen, NVRTC, cache)
// without touching the user's cache; such a test starts with
// ATTNJIT_REQUIRE_NVRTC().
#pragma once
#include <catch2/catch.hpp>

#include "cuda/nvrtc.hpp"
#include "engine.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

struct TempCacheEngine {
  TempDir dir;  // first: the engine's cache folder lives in it
  detail::Engine engine{config_in(dir)};

  static Config config_in(const TempDir& d) {
    Config config;
    config.cache = config_for(d.path() / "cache");
    return config;
  }
};

}  // namespace attnjit::test

// Catch2 v2 has no SKIP: without libnvrtc the test WARNs why and returns.
#define ATTNJIT_REQUIRE_NVRTC()                       \
  do {                                                \
    if (!::attnjit::cuda::nvrtc_available("")) {      \
      WARN("skipped: NVRTC is not available");        \
      return;                                         \
    }                                                 \
  } while (0)

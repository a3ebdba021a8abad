// An engine whose disk cache lives in a temporary folder removed with it:
// for tests that compile through the whole path (codegen, NVRTC, cache)
// without touching the user's cache.
#pragma once
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

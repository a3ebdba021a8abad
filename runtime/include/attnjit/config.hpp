// Run-time configuration, read from the environment once (Config::from_env)
// and passed down explicitly; nothing below this reads getenv.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "attnjit/cache_config.hpp"
#include "attnjit/export.h"

namespace attnjit {

struct ATTNJIT_API Config {
  CacheConfig cache;
  std::string nvrtc_library;  // ATTNJIT_NVRTC_LIBRARY: explicit path; empty = search .so.13, .so.12
  std::string log_level;      // ATTNJIT_LOG_LEVEL: trace|debug|info|warn|error|off (default warn)
  std::string telemetry;      // ATTNJIT_TELEMETRY: JSON lines per compile and miss to "stderr" or a file path; "" = off
  // ATTNJIT_CHECK=1: every run() and one-call entry point that reads device
  // tables waits for its stream and raises a bad entry at once (a debugging
  // switch: it costs a sync per call); 0 or unset: at the next call or check().
  bool check_every_run = false;
  // ATTNJIT_PREFILL_PERSISTENT: whether Hopper's warp-specialized prefill
  // (fa3_ws) runs persistent CTAs, at most one per SM, that take the items
  // in rounds and whose producer runs ahead into the next item. Unset or
  // "auto": where the planner measured them faster (the items cost the same
  // or fall in cost in launch order, heads up to 128 wide; docs/PERFORMANCE.md);
  // 1: every fa3_ws kernel (an A/B switch); 0: none.
  enum class Persistence { Auto, Always, Never };
  Persistence persistent_prefill = Persistence::Auto;

  // Throws Error(InvalidArgument) naming the variable when a value is malformed.
  static Config from_env();
  static std::string default_cache_dir();
};

}  // namespace attnjit

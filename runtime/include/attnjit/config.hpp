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
  // ATTNJIT_PREFILL_PERSISTENT=1: Hopper's warp-specialized prefill (fa3_ws)
  // runs persistent CTAs, one per SM, whose producer runs ahead into the
  // next item; 0 or unset: one CTA per item. Off until it is measured
  // against the default on a GPU (docs/PERFORMANCE.md, issue notes).
  bool persistent_prefill = false;

  // Throws Error(InvalidArgument) naming the variable when a value is malformed.
  static Config from_env();
  static std::string default_cache_dir();
};

}  // namespace attnjit

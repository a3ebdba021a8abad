// Run-time configuration, read from the environment once (Config::from_env)
// and passed down explicitly; nothing below this reads getenv.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "attnjit/export.h"

namespace attnjit {

enum class CacheMode : uint8_t {
  ReadWrite,  // default: load hits, compile and publish misses
  ReadOnly,   // a shipped cache: load hits, compile misses into memory only
  Off,        // never touch the disk
  Require,    // a miss is an error (fleets that must never compile)
};
ATTNJIT_API const char* to_string(CacheMode m) noexcept;
ATTNJIT_API CacheMode parse_cache_mode(std::string_view s, std::string_view arg);

struct CacheConfig {
  std::string dir;                          // ATTNJIT_CACHE_DIR, XDG_CACHE_HOME/attnjit, ~/.cache/attnjit
  CacheMode mode = CacheMode::ReadWrite;    // ATTNJIT_CACHE_MODE
  uint64_t max_bytes = 4ull << 30;          // ATTNJIT_CACHE_MAX_BYTES; LRU eviction above it
};

struct ATTNJIT_API Config {
  CacheConfig cache;
  std::string nvrtc_library;  // ATTNJIT_NVRTC_LIBRARY: explicit path; empty = search .so.13, .so.12
  std::string log_level;      // ATTNJIT_LOG_LEVEL: trace|debug|info|warn|error|off (default warn)
  std::string telemetry;      // ATTNJIT_TELEMETRY: JSON lines per compile and miss to "stderr" or a file path; "" = off

  // Throws Error(InvalidArgument) naming the variable when a value is malformed.
  static Config from_env();
  static std::string default_cache_dir();
};

}  // namespace attnjit

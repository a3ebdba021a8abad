// The on-disk cache's settings. Public vocabulary, kept in base/ so the cache
// (which depends on nothing in runtime/) and the runtime's Config share it.
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

// A size in bytes: digits, optionally a fraction and one of the suffixes K, M,
// G, T (powers of 1024; KB/KiB, MB/MiB, ... and B also accepted, any case):
// "4294967296", "512M", "4G", "1.5GiB". Throws Error(InvalidArgument) naming
// `arg` and the text for anything else: a sign, spaces, other characters, a
// fraction of a byte, zero, or more than 2^64 - 1 bytes. Shared by
// ATTNJIT_CACHE_MAX_BYTES and the CLI's --max-bytes.
ATTNJIT_API uint64_t parse_byte_count(std::string_view text, std::string_view arg);

struct CacheConfig {
  std::string dir;                          // ATTNJIT_CACHE_DIR, XDG_CACHE_HOME/attnjit, ~/.cache/attnjit
  CacheMode mode = CacheMode::ReadWrite;    // ATTNJIT_CACHE_MODE
  uint64_t max_bytes = 4ull << 30;          // ATTNJIT_CACHE_MAX_BYTES; LRU eviction above it
};

}  // namespace attnjit

// The cache key: SHA-256 over everything that can change the cubin. It lives
// beside the cache it addresses; the runtime fills the inputs from the
// generated translation unit. A golden test pins it, so an accidental change
// to what goes in shows up as a diff.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace attnjit {

// Bump when the cache entry format or the meaning of a key changes.
constexpr int kCacheSchemaVersion = 1;

struct KeyInputs {
  const std::string* source = nullptr;  // the generated translation unit
  // Every header the source may include, in their embedded (sorted) order.
  const std::vector<std::pair<std::string, std::string>>* headers = nullptr;
  std::string nvrtc_version;             // "13.0"
  std::vector<std::string> options;      // normalized NVRTC options (arch excluded)
  std::string arch;                      // "sm_90a"
  std::string library_version;           // attnjit's
};

std::string make_cache_key(const KeyInputs& in);

}  // namespace attnjit

// The cache key: SHA-256 over everything that can change the cubin. A golden
// test pins it, so an accidental change to what goes in shows up as a diff.
#pragma once
#include <string>
#include <vector>

#include "codegen.hpp"

namespace attnjit {

// Bump when the cache entry format or the meaning of a key changes.
constexpr int kCacheSchemaVersion = 1;

struct KeyInputs {
  const TranslationUnit* tu = nullptr;   // source and every embedded header
  std::string nvrtc_version;             // "13.0"
  std::vector<std::string> options;      // normalized NVRTC options (arch excluded)
  std::string arch;                      // "sm_90a"
  std::string library_version;           // attnjit's
};

std::string make_cache_key(const KeyInputs& in);

}  // namespace attnjit

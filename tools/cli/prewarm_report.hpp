// prewarm's accounting: what happened to each kernel (compiled, already
// cached, failed, not attempted) and, for the compiled ones, whether the
// cache really holds them afterwards. "Stored" is established by reading the
// entry back from disk and verifying it, never inferred from a compile having
// succeeded: a full disk, an unwritable folder, `ulimit -f` or the size cap
// all let a compile succeed and the store fail.
#pragma once
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"

namespace attnjit::cli {

struct PrewarmOutcome {
  enum Kind { Pending, Compiled, Cached, Failed, Skipped } kind = Pending;
  double seconds = 0;
  std::string key;    // cache key (compiled and cached kernels)
  std::string error;  // failed kernels
};

struct PrewarmRun {
  std::string label, arch;
  std::vector<std::string> names;        // kernel names, parallel to outcomes
  std::vector<PrewarmOutcome> outcomes;
  double seconds = 0;
  bool allow_memory_only = false;        // --allow-memory-only
};

struct PrewarmTally {
  size_t compiled = 0, stored = 0, cached = 0, failed = 0, not_stored = 0, not_attempted = 0;
};

// Before compiling anything: tries writing in the cache folder. When the mode
// writes and the folder cannot be written, throws Error(CacheError) (exit 1)
// saying why, unless memory-only is allowed, which prints a warning instead.
// In modes readonly and off it notes that nothing will be kept.
void preflight_cache(cache::DiskCache& cache, bool allow_memory_only);

// Whether the entry for arch/key is on disk and verifies.
bool entry_is_stored(const cache::DiskCache& cache, const std::string& arch, const std::string& key);

// Counts (reading back each compiled kernel's entry), prints the summary line
// to stdout and the details (each distinct error once, the reason kernels were
// not stored once) to stderr. Throws CLI::RuntimeError(1) when a kernel
// failed, or when the cache mode writes and a compiled kernel is not stored
// (unless run.allow_memory_only).
PrewarmTally report_prewarm(PrewarmRun& run, const cache::DiskCache& cache);

}  // namespace attnjit::cli

// prewarm's accounting: what happened to each kernel (compiled, already
// cached, not cached, failed, not attempted) and, for the compiled ones,
// whether the cache really holds them afterwards. "Stored" is established by
// reading the entry back from disk and verifying it, never inferred from a
// compile having succeeded: a full disk, an unwritable folder, `ulimit -f` or
// the size cap all let a compile succeed and the store fail. In a mode that
// does not write (off, readonly) nothing this run compiled counts as stored,
// even where an earlier run left an entry.
#pragma once
#include <string>
#include <vector>

#include "attnjit/cache_config.hpp"

namespace attnjit::cli {

struct PrewarmOutcome {
  // NotCached: a check-only run (the folder cannot be written) found no
  // verified entry, and did not compile what it could not store.
  enum Kind { Pending, Compiled, Cached, NotCached, Failed, Skipped } kind = Pending;
  double seconds = 0;
  std::string key;         // cache key (compiled, cached and not-cached kernels)
  std::string entry_path;  // where the cache keeps that key's entry
  std::string error;  // failed kernels
};

struct PrewarmRun {
  std::string label, arch;
  std::vector<std::string> names;        // kernel names, parallel to outcomes
  std::vector<PrewarmOutcome> outcomes;
  double seconds = 0;
  bool allow_memory_only = false;        // --allow-memory-only
  CacheMode mode = CacheMode::ReadWrite; // the mode prewarm ran in (require is run as readwrite)
  std::string unwritable;                // why the folder cannot be written: the run only checked (see preflight_cache)
};

struct PrewarmTally {
  size_t compiled = 0, stored = 0, cached = 0, not_cached = 0, failed = 0, not_stored = 0, not_attempted = 0;
};

// Before compiling anything, in a mode that writes: tries writing in the
// cache folder and returns why that fails ("" when it works). The caller
// then only checks that every kernel is already cached (nothing to store,
// nothing to compile), unless memory-only is allowed: then this warns and
// the run compiles without storing. In modes readonly and off it notes that
// nothing will be kept and returns "".
std::string preflight_cache(const CacheConfig& cache, bool allow_memory_only);

// Whether the entry for arch/key is at `path` and verifies.
bool entry_is_stored(const std::string& path, const std::string& arch, const std::string& key);

// Counts (reading back each compiled kernel's entry), prints the summary line
// to stdout and the details (each distinct error once, the reason kernels were
// not stored once) to stderr. Throws CLI::RuntimeError(1) when a kernel
// failed, when a check-only run found kernels not cached, or when the mode
// writes and a compiled kernel is not stored (unless run.allow_memory_only).
// `not_writable_reason`: the Runtime's disk cache's, read after the run.
PrewarmTally report_prewarm(PrewarmRun& run, const CacheConfig& cache, const std::string& not_writable_reason);

}  // namespace attnjit::cli

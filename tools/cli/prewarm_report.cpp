#include "prewarm_report.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <map>

#include "attnjit/error.hpp"
#include "cache/entry_format.hpp"
#include "cache/posix_io.hpp"
#include "cache/write_probe.hpp"
#include "common.hpp"
#include "exit_codes.hpp"

namespace attnjit::cli {

namespace {

bool mode_writes(CacheMode m) { return m == CacheMode::ReadWrite || m == CacheMode::Require; }

std::string kernels_text(size_t n) { return fmt::format("{} kernel{}", n, n == 1 ? "" : "s"); }

}  // namespace

std::string preflight_cache(const CacheConfig& c, bool allow_memory_only) {
  if (!mode_writes(c.mode)) {
    fmt::print(stderr, "note: cache mode {} (ATTNJIT_CACHE_MODE): kernels are compiled but not stored in {}\n",
               to_string(c.mode), c.dir);
    return {};
  }
  const cache::WriteProbe probe = cache::probe_writable(c.dir);
  if (probe.writable) return {};
  if (allow_memory_only)
    fmt::print(stderr, "warning: the cache folder {} is not writable ({}): kernels are compiled but not stored "
                       "(--allow-memory-only)\n", c.dir, probe.reason);
  else
    fmt::print(stderr, "note: the cache folder {} is not writable ({}): checking that every kernel is already "
                       "cached there; nothing is compiled\n", c.dir, probe.reason);
  return probe.reason;
}

bool entry_is_stored(const std::string& path, const std::string& arch, const std::string& key) {
  std::string bytes;
  if (cache::posix::read_file(path, bytes) != 0) return false;
  cache::Entry entry;
  return cache::entry_format::parse_entry(bytes, arch, key, entry).empty();
}

PrewarmTally report_prewarm(PrewarmRun& run, const CacheConfig& c, const std::string& not_writable_reason) {
  PrewarmTally t;
  const bool writes = mode_writes(run.mode);
  std::vector<std::string> unstored, uncached;
  for (size_t i = 0; i < run.outcomes.size(); ++i) {
    auto& out = run.outcomes[i];
    if (out.kind == PrewarmOutcome::Pending) out.kind = PrewarmOutcome::Skipped;
    switch (out.kind) {
      case PrewarmOutcome::Compiled:
        ++t.compiled;
        // Checked after every worker finished: a later store's eviction may have removed it.
        // A mode that does not write stored nothing, whatever an earlier run left there.
        if (writes && entry_is_stored(out.entry_path, run.arch, out.key)) {
          ++t.stored;
        } else {
          ++t.not_stored;
          unstored.push_back(run.names[i]);
        }
        break;
      case PrewarmOutcome::Cached: ++t.cached; break;
      case PrewarmOutcome::NotCached:
        ++t.not_cached;
        uncached.push_back(run.names[i]);
        break;
      case PrewarmOutcome::Failed: ++t.failed; break;
      default: ++t.not_attempted; break;
    }
  }
  fmt::print("prewarm {} for {}: {} kernels: {} compiled, {} stored{}, {} already cached, {} failed, {} not stored{}{} "
             "in {:.1f} s (cache: {})\n",
             run.label, run.arch, run.outcomes.size(), t.compiled, t.stored,
             writes ? std::string() : fmt::format(" (cache mode {})", to_string(run.mode)), t.cached, t.failed,
             t.not_stored,
             run.unwritable.empty() ? std::string()
                                    : fmt::format(", {} not cached (checked only: the cache folder is not writable)",
                                                  t.not_cached),
             t.not_attempted ? fmt::format(", {} not attempted", t.not_attempted) : std::string(), run.seconds,
             c.dir);

  if (t.not_stored) {
    std::string reason = writes ? not_writable_reason
                                : fmt::format("cache mode {} does not write", to_string(run.mode));
    if (reason.empty())
      reason = fmt::format("their entries are not in {} after the run (evicted by the size cap of {}, or removed "
                           "by another process)", c.dir, format_bytes(c.max_bytes));
    fmt::print(stderr, "not stored: {} ({})\n  {}\n", fmt::join(unstored, ", "), t.not_stored, reason);
  }
  if (t.failed) {
    // One message per distinct error, naming the kernels it hit.
    std::map<std::string, std::vector<std::string>> by_error;
    for (size_t i = 0; i < run.outcomes.size(); ++i)
      if (run.outcomes[i].kind == PrewarmOutcome::Failed) by_error[run.outcomes[i].error].push_back(run.names[i]);
    for (const auto& [error, names] : by_error) fmt::print(stderr, "failed: {}\n  {}\n", fmt::join(names, ", "), error);
    if (t.not_attempted)
      fmt::print(stderr, "stopped after an invalid-argument error; {} not attempted\n", t.not_attempted);
  }
  if (!run.unwritable.empty() && t.not_cached == 0 && t.failed == 0 && t.not_attempted == 0)
    fmt::print(stderr, "note: the cache folder {} is not writable, but every kernel is already cached there and "
                       "verifies: nothing to store\n", c.dir);
  if (t.failed) throw CLI::RuntimeError(kExitFailure);
  if (t.not_cached) {
    fmt::print(stderr, "attnjit: error: cannot store kernels in the cache folder {}: {}. {} of {} are not cached "
                       "there and were not compiled (they could not be stored): {}. Fix its permissions or free "
                       "space (docs/RELIABILITY.md: shared caches), choose another with --cache-dir, or pass "
                       "--allow-memory-only to compile without storing\n",
               c.dir, run.unwritable, t.not_cached, kernels_text(run.outcomes.size()),
               fmt::join(uncached, ", "));
    throw CLI::RuntimeError(kExitFailure);
  }
  if (t.not_stored && writes && !run.allow_memory_only) {
    fmt::print(stderr, "attnjit: error: {} of {} compiled kernels were not stored in the cache; pass "
                       "--allow-memory-only to accept that\n", t.not_stored, t.compiled);
    throw CLI::RuntimeError(kExitFailure);
  }
  return t;
}

}  // namespace attnjit::cli

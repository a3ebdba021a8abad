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

bool mode_writes(const cache::DiskCache& c) {
  return c.config().mode == CacheMode::ReadWrite || c.config().mode == CacheMode::Require;
}

}  // namespace

void preflight_cache(cache::DiskCache& c, bool allow_memory_only) {
  const std::string& dir = c.config().dir;
  if (!mode_writes(c)) {
    fmt::print(stderr, "note: cache mode {} (ATTNJIT_CACHE_MODE): kernels are compiled but not stored in {}\n",
               to_string(c.config().mode), dir);
    return;
  }
  const cache::WriteProbe probe = cache::probe_writable(dir);
  std::string reason = probe.writable ? c.not_writable_reason() : probe.reason;
  if (reason.empty()) return;
  if (allow_memory_only) {
    fmt::print(stderr, "warning: the cache folder {} is not writable ({}): kernels are compiled but not stored "
                       "(--allow-memory-only)\n", dir, reason);
    return;
  }
  throw Error(Status::CacheError,
              fmt::format("cannot store kernels in the cache folder {}: {}. Fix its permissions or free space "
                          "(docs/RELIABILITY.md: shared caches), choose another with --cache-dir, or pass "
                          "--allow-memory-only to compile without storing",
                          dir, reason));
}

bool entry_is_stored(const cache::DiskCache& c, const std::string& arch, const std::string& key) {
  std::string bytes;
  if (cache::posix::read_file(c.entry_path(arch, key), bytes) != 0) return false;
  cache::Entry entry;
  return cache::entry_format::parse_entry(bytes, arch, key, entry).empty();
}

PrewarmTally report_prewarm(PrewarmRun& run, const cache::DiskCache& c) {
  PrewarmTally t;
  const bool expect_store = mode_writes(c);
  std::vector<std::string> unstored;
  for (size_t i = 0; i < run.outcomes.size(); ++i) {
    auto& out = run.outcomes[i];
    if (out.kind == PrewarmOutcome::Pending) out.kind = PrewarmOutcome::Skipped;
    switch (out.kind) {
      case PrewarmOutcome::Compiled:
        ++t.compiled;
        // Checked after every worker finished: a later store's eviction may have removed it.
        if (entry_is_stored(c, run.arch, out.key)) {
          ++t.stored;
        } else {
          ++t.not_stored;
          unstored.push_back(run.names[i]);
        }
        break;
      case PrewarmOutcome::Cached: ++t.cached; break;
      case PrewarmOutcome::Failed: ++t.failed; break;
      default: ++t.not_attempted; break;
    }
  }
  fmt::print("prewarm {} for {}: {} kernels: {} compiled, {} stored, {} already cached, {} failed, {} not stored{} "
             "in {:.1f} s (cache: {})\n",
             run.label, run.arch, run.outcomes.size(), t.compiled, t.stored, t.cached, t.failed, t.not_stored,
             t.not_attempted ? fmt::format(", {} not attempted", t.not_attempted) : std::string(), run.seconds,
             c.config().dir);

  if (t.not_stored) {
    std::string reason = c.not_writable_reason();
    if (reason.empty())
      reason = fmt::format("their entries are not in {} after the run (evicted by the size cap of {}, or removed "
                           "by another process)", c.config().dir, format_bytes(c.config().max_bytes));
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
  if (t.failed) throw CLI::RuntimeError(kExitFailure);
  if (t.not_stored && expect_store && !run.allow_memory_only) {
    fmt::print(stderr, "attnjit: error: {} of {} compiled kernels were not stored in the cache; pass "
                       "--allow-memory-only to accept that\n", t.not_stored, t.compiled);
    throw CLI::RuntimeError(kExitFailure);
  }
  return t;
}

}  // namespace attnjit::cli

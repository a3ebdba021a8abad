// The content-addressed on-disk cubin cache.
//
// Layout: <dir>/<arch>/<key[0:2]>/<key>.cubin, one self-verifying file per
// entry (see entry_format.hpp), published by temp file + fsync + rename, with
// a per-key lock file beside it so that N processes asking for one key compile
// it once. This class knows nothing of kernels or NVRTC: the caller hands it a
// `produce` callback that compiles on a miss.
#pragma once
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "attnjit/cache_config.hpp"
#include "cache/single_flight.hpp"

namespace attnjit::cache {

struct Entry {
  std::string key;                        // 64 lower-case hex digits (SHA-256)
  std::string arch;                       // e.g. "sm_90a"
  std::vector<std::string> kernel_names;  // extern "C" entry points in the cubin
  uint32_t shared_mem_bytes = 0;          // dynamic shared memory the kernels need
  nlohmann::json metadata;                // spec, nvrtc version/options, compile_seconds, created
  std::vector<char> cubin;                // the payload
};

struct EntryInfo {
  std::filesystem::path path;
  std::string arch, key;
  uint64_t bytes = 0;
  std::filesystem::file_time_type last_used;  // LRU clock (mtime, bumped on every hit)
  nlohmann::json metadata;                    // empty when the header could not be read
};

// A temporary file of an interrupted or running publish (temp_files.hpp).
struct TemporaryInfo {
  std::filesystem::path path;
  uint64_t bytes = 0;
  std::chrono::seconds age{0};
  std::string writer;  // "pid 123 on host h: gone", "running" or "unknown"
};
struct VerifyReport {
  size_t ok = 0, corrupt = 0, removed = 0;
  std::vector<std::string> problems;
  std::vector<TemporaryInfo> temporaries;  // not corruption, but shown: a kill mid-publish leaves them
};
struct GcReport { size_t evicted = 0, temporaries_reaped = 0; uint64_t bytes_before = 0, bytes_after = 0; };
struct Stats {
  size_t entries = 0;
  uint64_t bytes = 0;
  uint64_t max_bytes = 0;
  std::string dir;
  CacheMode mode;
  bool writable = false;
  std::vector<TemporaryInfo> temporaries;
};

class DiskCache {
 public:
  explicit DiskCache(CacheConfig config);

  const CacheConfig& config() const { return config_; }
  // False in mode off/readonly, or after the folder proved unwritable (degraded to
  // memory-only; warned once).
  bool writable() const;
  // Why the cache is not writable: the mode, or the failure that degraded it
  // to memory-only (naming the step, the path and the errno text); empty
  // while writable.
  std::string not_writable_reason() const;
  std::filesystem::path entry_path(const std::string& arch, const std::string& key) const;

  // Verified load. A corrupt or truncated entry is logged, removed (when
  // writable) and reported as a miss. Bumps the entry's LRU time on a hit.
  std::optional<Entry> load(const std::string& arch, const std::string& key);
  // Atomic publish; then evicts least-recently-used entries above max_bytes.
  // Returns false (after one warning) when the cache cannot be written, and
  // false without a warning in modes readonly and off. Throws
  // Error(CacheError) for failures that are not about permission or space
  // (e.g. EIO), naming the path and the errno text.
  bool store(const Entry& entry);

  enum class Source { Disk, Produced };
  // load(); on a miss take the per-key lock (in-process and cross-process),
  // load again, else call produce() and store its result. Mode `require`
  // turns a miss into Error(CacheMiss) whose message includes `what`.
  // Threads of one process that wait on another's produce() receive a copy
  // of its result and its Source (where the bytes came from), so produce()
  // runs once even when the cache cannot be written. A store that fails
  // after produce() is logged, not thrown: the produced entry is still good.
  std::pair<Entry, Source> get_or_produce(const std::string& arch, const std::string& key,
                                          const std::string& what,
                                          const std::function<Entry()>& produce);

  // Maintenance (the CLI's `cache` subcommands).
  std::vector<EntryInfo> list() const;
  VerifyReport verify(bool remove_corrupt);
  size_t clear();                                   // entries removed
  GcReport gc(std::optional<uint64_t> max_bytes);   // reap temporaries, evict to the cap
  Stats stats() const;
  // Removes temporary files left by writers that died: those older than
  // `age`, and those of this host whose writer process is gone (after
  // temp_files::kDeadWriterGrace).
  size_t reap_temporaries(std::chrono::seconds age);
  // The temporaries there now, with their writers' state.
  std::vector<TemporaryInfo> temporaries() const;

  // Temporaries older than this belong to dead writers (a live one finishes a
  // cubin in well under a second); store() and gc() reap them.
  static constexpr std::chrono::seconds kStaleTemporaryAge{600};

 private:
  bool disk_allowed() const { return config_.mode != CacheMode::Off; }
  // The mode lets this object change the folder (it may still turn out unwritable).
  bool mode_writes() const { return config_.mode == CacheMode::ReadWrite || config_.mode == CacheMode::Require; }
  // Switches to memory-only after an unwritable folder; warns only the first time.
  void degrade(const std::string& step, const std::filesystem::path& where, int err);
  // Handles a failed write: degrades for "cannot write here" errors, throws
  // Error(CacheError) for the rest.
  void write_failed(const std::string& step, const std::filesystem::path& where, int err);
  // Deletes least-recently-used entries until the total is at most `cap`,
  // sparing the entry keep_arch/keep_key (empty: spare none).
  void evict_to(uint64_t cap, const std::string& keep_arch, const std::string& keep_key, GcReport& report);
  std::pair<Entry, Source> produce_locked(const std::string& arch, const std::string& key,
                                          const std::function<Entry()>& produce);

  CacheConfig config_;
  mutable std::mutex mutex_;  // guards degraded_ and reaped_
  bool degraded_ = false;
  std::string degraded_reason_;
  bool reaped_ = false;       // stale temporaries reaped once, on the first store
  SingleFlight<std::pair<Entry, Source>> flights_;  // in-process single flight per arch/key
};

}  // namespace attnjit::cache

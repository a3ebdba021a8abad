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

#include "attnjit/config.hpp"

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

struct VerifyReport { size_t ok = 0, corrupt = 0, removed = 0; std::vector<std::string> problems; };
struct GcReport { size_t evicted = 0, temporaries_reaped = 0; uint64_t bytes_before = 0, bytes_after = 0; };
struct Stats { size_t entries = 0; uint64_t bytes = 0; uint64_t max_bytes = 0; std::string dir; CacheMode mode; bool writable = false; };

class DiskCache {
 public:
  explicit DiskCache(CacheConfig config);

  const CacheConfig& config() const { return config_; }
  // False in mode off/readonly, or after the folder proved unwritable (degraded to
  // memory-only; warned once).
  bool writable() const;
  std::filesystem::path entry_path(const std::string& arch, const std::string& key) const;

  // Verified load. A corrupt or truncated entry is logged, removed (when
  // writable) and reported as a miss. Bumps the entry's LRU time on a hit.
  std::optional<Entry> load(const std::string& arch, const std::string& key);
  // Atomic publish; then evicts least-recently-used entries above max_bytes.
  // Returns false (after one warning) when the cache cannot be written.
  bool store(const Entry& entry);

  enum class Source { Disk, Produced };
  // load(); on a miss take the per-key lock (in-process and cross-process),
  // load again, else call produce() and store its result. Mode `require`
  // turns a miss into Error(CacheMiss) whose message includes `what`.
  std::pair<Entry, Source> get_or_produce(const std::string& arch, const std::string& key,
                                          const std::string& what,
                                          const std::function<Entry()>& produce);

  // Maintenance (the CLI's `cache` subcommands).
  std::vector<EntryInfo> list() const;
  VerifyReport verify(bool remove_corrupt);
  size_t clear();                                   // entries removed
  GcReport gc(std::optional<uint64_t> max_bytes);   // reap temporaries, evict to the cap
  Stats stats() const;
  // Removes temporary files left by writers that died, older than `age`.
  size_t reap_temporaries(std::chrono::seconds age);

 private:
  CacheConfig config_;
  mutable std::mutex mutex_;  // guards degraded_ and the in-process key locks
  bool degraded_ = false;
};

}  // namespace attnjit::cache

// DiskCache: load, store and get_or_produce. Maintenance (list, verify, clear,
// gc, stats, reaping) is in maintenance.cpp, LRU eviction in eviction.cpp.
#include "cache/disk_cache.hpp"

#include <fmt/format.h>

#include <cerrno>

#include "attnjit/error.hpp"
#include "cache/atomic_publish.hpp"
#include "cache/cache_layout.hpp"
#include "cache/corrupt_entry.hpp"
#include "cache/entry_format.hpp"
#include "cache/file_lock.hpp"
#include "cache/posix_io.hpp"
#include "log.hpp"

namespace attnjit::cache {

namespace fs = std::filesystem;

namespace {

// Errors that mean "this folder cannot take our files", as opposed to a
// failing disk: the cache keeps working memory-only rather than failing calls.
bool cannot_write_here(int err) {
  switch (err) {
    // EFBIG: the file size limit (ulimit -f), once the CLI ignores SIGXFSZ.
    case EACCES: case EPERM: case EROFS: case ENOTDIR: case ENOSPC: case EDQUOT: case EFBIG:
      return true;
    default:
      return false;
  }
}

}  // namespace

DiskCache::DiskCache(CacheConfig config) : config_(std::move(config)) {
  if (disk_allowed() && config_.dir.empty())
    throw Error(Status::InvalidArgument,
                "cache dir is empty; set ATTNJIT_CACHE_DIR to a folder, or ATTNJIT_CACHE_MODE=off");
  if (mode_writes())
    if (int err = posix::make_dirs(config_.dir)) write_failed("create folder", config_.dir, err);
}

bool DiskCache::writable() const {
  if (!mode_writes()) return false;
  std::lock_guard<std::mutex> g(mutex_);
  return !degraded_;
}

fs::path DiskCache::entry_path(const std::string& arch, const std::string& key) const {
  return layout::entry_path(config_.dir, arch, key);
}

std::string DiskCache::not_writable_reason() const {
  if (!mode_writes()) return fmt::format("cache mode {} does not write", to_string(config_.mode));
  std::lock_guard<std::mutex> g(mutex_);
  return degraded_reason_;
}

void DiskCache::degrade(const std::string& step, const fs::path& where, int err) {
  bool first;
  {
    std::lock_guard<std::mutex> g(mutex_);
    first = !degraded_;
    degraded_ = true;
    if (first) degraded_reason_ = fmt::format("cannot {} {}: {}", step, where.string(), posix::errno_text(err));
  }
  if (first)
    log::warn("attnjit cache: cannot {} {}: {}; the cache folder {} is not writable, continuing memory-only "
              "(kernels are compiled but not saved)",
              step, where.string(), posix::errno_text(err), config_.dir);
}

void DiskCache::write_failed(const std::string& step, const fs::path& where, int err) {
  if (cannot_write_here(err)) return degrade(step, where, err);
  throw Error(Status::CacheError,
              fmt::format("attnjit cache: cannot {} {}: {}", step, where.string(), posix::errno_text(err)));
}

std::optional<Entry> DiskCache::load(const std::string& arch, const std::string& key) {
  const fs::path path = entry_path(arch, key);  // validates arch and key, even in mode off
  if (!disk_allowed()) return std::nullopt;

  std::string bytes;
  posix::FileId id;
  if (int err = posix::read_file(path, bytes, &id)) {
    if (err != ENOENT && err != ENOTDIR)
      log::warn("attnjit cache: cannot read {}: {}; treated as a miss", path.string(), posix::errno_text(err));
    return std::nullopt;
  }
  Entry entry;
  if (auto problem = entry_format::parse_entry(bytes, arch, key, entry); !problem.empty()) {
    discard_corrupt_entry(path, problem, id, writable());
    return std::nullopt;
  }
  if (writable())
    if (int err = posix::touch_mtime(path))  // a lost LRU bump only makes eviction less exact
      log::debug("attnjit cache: cannot update the LRU time of {}: {}", path.string(), posix::errno_text(err));
  return entry;
}

bool DiskCache::store(const Entry& entry) {
  const fs::path path = entry_path(entry.arch, entry.key);
  if (!writable()) return false;

  const std::string bytes = entry_format::serialize(entry);
  const PublishResult published = publish_atomically(path, bytes, layout::temp_prefix(entry.key));
  if (!published.ok()) {
    write_failed(published.step, published.where, published.err);
    return false;
  }

  bool first_store;
  {
    std::lock_guard<std::mutex> g(mutex_);
    first_store = !reaped_;
    reaped_ = true;
  }
  // Tidying must never fail a store that already succeeded.
  try {
    if (first_store) reap_temporaries(kStaleTemporaryAge);
    GcReport report;
    evict_to(config_.max_bytes, entry.arch, entry.key, report);
  } catch (const Error& e) {
    log::warn("{}", e.what());
  }
  return true;
}

std::pair<Entry, DiskCache::Source> DiskCache::get_or_produce(const std::string& arch, const std::string& key,
                                                              const std::string& what,
                                                              const std::function<Entry()>& produce) {
  const fs::path path = entry_path(arch, key);
  if (!disk_allowed()) return {produce(), Source::Produced};
  if (auto hit = load(arch, key)) return {std::move(*hit), Source::Disk};
  if (config_.mode == CacheMode::Require)
    throw Error(Status::CacheMiss,
                fmt::format("attnjit cache: {} is not cached (key {}, arch {}; looked for {} in the cache folder {}), "
                            "and cache mode 'require' forbids compiling it; prewarm the cache with `attnjit "
                            "prewarm`, or set ATTNJIT_CACHE_MODE=readwrite",
                            what, key, arch, path.string(), config_.dir));
  return flights_.run(arch + "/" + key, [&] { return produce_locked(arch, key, produce); }).first;
}

// Runs as the one in-process leader for arch/key.
std::pair<Entry, DiskCache::Source> DiskCache::produce_locked(const std::string& arch, const std::string& key,
                                                              const std::function<Entry()>& produce) {
  FileLock lock;
  if (writable()) {
    const fs::path lock_file = layout::lock_path(config_.dir, arch, key);
    int err = posix::make_dirs(lock_file.parent_path());
    if (err == 0) err = lock.lock(lock_file, FileLock::Wait::Block);
    if (err != 0) {
      if (cannot_write_here(err)) {
        degrade("lock", lock_file, err);
      } else {
        // e.g. ENOLCK on a network file system without lock service. Publishing
        // stays atomic without the lock; the cost is a possible second compile.
        log::warn("attnjit cache: cannot lock {}: {}; compiling without the cross-process lock",
                  lock_file.string(), posix::errno_text(err));
      }
    }
  }
  // Another process may have published the entry while we waited for its lock.
  if (auto hit = load(arch, key)) return {std::move(*hit), Source::Disk};

  Entry entry = produce();
  if (entry.key != key || entry.arch != arch)
    throw Error(Status::Internal,
                fmt::format("attnjit cache: produce() for {}/{} returned an entry for {}/{}", arch, key,
                            entry.arch, entry.key));
  try {
    store(entry);
  } catch (const Error& e) {
    log::error("{}; using the compiled kernel without saving it", e.what());
  }
  return {std::move(entry), Source::Produced};
}

}  // namespace attnjit::cache

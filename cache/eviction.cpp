// The size cap: least-recently-used entries go first. The LRU clock is each
// entry file's mtime, which load() bumps on every hit, so the order is shared
// by every process using the folder without any index file to keep in sync.
#include <algorithm>

#include "cache/cache_layout.hpp"
#include "cache/disk_cache.hpp"
#include "cache/posix_io.hpp"
#include "log.hpp"

namespace attnjit::cache {

void DiskCache::evict_to(uint64_t cap, const std::string& keep_arch, const std::string& keep_key,
                         GcReport& report) {
  // A full scan per store is fine: stores follow compiles, which take far
  // longer than listing even a large cache.
  std::vector<layout::FoundFile> entries;
  uint64_t total = 0;
  for (auto& f : layout::scan(config_.dir)) {
    if (f.kind != layout::FileKind::Entry) continue;
    total += f.bytes;
    entries.push_back(std::move(f));
  }
  report.bytes_before = total;
  if (total > cap) {
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return a.mtime != b.mtime ? a.mtime < b.mtime : a.path < b.path;
    });
    for (const auto& f : entries) {
      if (total <= cap) break;
      if (f.arch == keep_arch && f.key == keep_key) continue;
      if (int err = posix::remove_file(f.path)) {
        log::warn("attnjit cache: cannot evict {}: {}", f.path.string(), posix::errno_text(err));
        continue;
      }
      log::debug("attnjit cache: evicted {} ({} bytes) to stay under {} bytes", f.path.string(), f.bytes, cap);
      total -= f.bytes;
      ++report.evicted;
    }
  }
  report.bytes_after = total;
}

}  // namespace attnjit::cache

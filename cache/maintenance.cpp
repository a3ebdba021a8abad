// DiskCache's maintenance operations, the ones behind `attnjit cache ...`:
// list, verify, clear, gc, stats and the reaping of abandoned temporaries.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "attnjit/error.hpp"
#include "cache/cache_layout.hpp"
#include "cache/corrupt_entry.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry_format.hpp"
#include "cache/file_lock.hpp"
#include "cache/posix_io.hpp"
#include "cache/temp_files.hpp"
#include "log.hpp"

namespace attnjit::cache {

namespace fs = std::filesystem;

namespace {

// Only the header: listing must not read and hash every cubin.
nlohmann::json read_metadata(const fs::path& path) {
  std::string head;
  uint64_t file_size = 0;
  if (posix::read_head(path, entry_format::kPrefixBytes, head, &file_size)) return {};
  const uint64_t end = entry_format::header_end(head);
  if (end == 0 || end > file_size) return {};
  if (posix::read_head(path, end, head, &file_size)) return {};
  entry_format::Header header;
  if (!entry_format::parse_header(head, file_size, header).empty()) return {};
  return header.json["metadata"];
}

std::vector<layout::FoundFile> only(std::vector<layout::FoundFile> files, layout::FileKind kind) {
  files.erase(std::remove_if(files.begin(), files.end(), [&](const auto& f) { return f.kind != kind; }),
              files.end());
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

// Lock files whose entry is gone, or all of them; a lock someone holds (a
// compile in progress) is left alone.
size_t remove_idle_locks(const std::vector<layout::FoundFile>& files, bool only_orphans) {
  size_t removed = 0;
  for (const auto& f : files) {
    if (f.kind != layout::FileKind::Lock) continue;
    if (only_orphans && fs::exists(fs::path(f.path).replace_extension(".cubin"))) continue;
    FileLock lock;
    if (lock.lock(f.path, FileLock::Wait::DontBlock) == 0 && lock.remove_while_held(f.path) == 0) ++removed;
  }
  return removed;
}

}  // namespace

std::vector<EntryInfo> DiskCache::list() const {
  std::vector<EntryInfo> out;
  if (!disk_allowed()) return out;
  for (const auto& f : only(layout::scan(config_.dir), layout::FileKind::Entry))
    out.push_back(EntryInfo{f.path, f.arch, f.key, f.bytes, f.mtime, read_metadata(f.path)});
  return out;
}

VerifyReport DiskCache::verify(bool remove_corrupt) {
  VerifyReport report;
  if (!disk_allowed()) return report;
  for (const auto& f : only(layout::scan(config_.dir), layout::FileKind::Entry)) {
    std::string bytes;
    posix::FileId id;
    std::string problem;
    const int err = posix::read_file(f.path, bytes, &id);
    if (err != 0) {
      if (err == ENOENT) continue;  // evicted by another process since the scan
      problem = fmt::format("cannot read: {}", posix::errno_text(err));
    } else {
      Entry entry;
      problem = entry_format::parse_entry(bytes, f.arch, f.key, entry);
    }
    if (problem.empty()) {
      ++report.ok;
      continue;
    }
    ++report.corrupt;
    report.problems.push_back(f.path.string() + ": " + problem);
    if (remove_corrupt && mode_writes() && err == 0 && discard_corrupt_entry(f.path, problem, id, true))
      ++report.removed;
  }
  report.temporaries = temporaries();
  return report;
}

size_t DiskCache::clear() {
  if (!mode_writes()) return 0;
  const auto files = layout::scan(config_.dir);
  size_t removed = 0;
  for (const auto& f : files) {
    if (f.kind != layout::FileKind::Entry) continue;
    if (int err = posix::remove_file(f.path))
      throw Error(Status::CacheError,
                  fmt::format("attnjit cache: cannot remove {}: {}", f.path.string(), posix::errno_text(err)));
    ++removed;
  }
  remove_idle_locks(files, /*only_orphans=*/false);
  // Fresh temporaries belong to live writers, whose rename would fail without them.
  reap_temporaries(kStaleTemporaryAge);
  return removed;
}

GcReport DiskCache::gc(std::optional<uint64_t> max_bytes) {
  GcReport report;
  if (!disk_allowed()) return report;
  if (!mode_writes()) {
    // Nothing may change; still report what is there.
    for (const auto& f : layout::scan(config_.dir))
      if (f.kind == layout::FileKind::Entry) report.bytes_before += f.bytes;
    report.bytes_after = report.bytes_before;
    return report;
  }
  report.temporaries_reaped = reap_temporaries(kStaleTemporaryAge);
  evict_to(max_bytes.value_or(config_.max_bytes), "", "", report);
  remove_idle_locks(layout::scan(config_.dir), /*only_orphans=*/true);
  return report;
}

Stats DiskCache::stats() const {
  Stats s;
  s.max_bytes = config_.max_bytes;
  s.dir = config_.dir;
  s.mode = config_.mode;
  s.writable = writable();
  if (!disk_allowed()) return s;
  for (const auto& f : layout::scan(config_.dir)) {
    if (f.kind != layout::FileKind::Entry) continue;
    ++s.entries;
    s.bytes += f.bytes;
  }
  s.temporaries = temporaries();
  return s;
}

std::vector<TemporaryInfo> DiskCache::temporaries() const {
  std::vector<TemporaryInfo> out;
  if (!disk_allowed()) return out;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& f : only(layout::scan(config_.dir), layout::FileKind::Temporary)) {
    TemporaryInfo t;
    t.path = f.path;
    t.bytes = f.bytes;
    t.age = std::chrono::duration_cast<std::chrono::seconds>(now - f.mtime);
    const std::string name = f.path.filename().string();
    const auto w = temp_files::writer_of(name);
    const char* state = temp_files::to_string(temp_files::writer_state(name));
    t.writer = !w ? std::string("unknown writer")
               : w->host.empty() ? fmt::format("pid {} on an unrecorded host: {}", w->pid, state)
                                 : fmt::format("pid {} on host {}: {}", w->pid, w->host, state);
    out.push_back(std::move(t));
  }
  return out;
}

size_t DiskCache::reap_temporaries(std::chrono::seconds age) {
  if (!mode_writes()) return 0;
  const auto now = fs::file_time_type::clock::now();
  const auto cutoff = now - age, grace_cutoff = now - temp_files::kDeadWriterGrace;
  size_t reaped = 0;
  for (const auto& f : layout::scan(config_.dir)) {
    if (f.kind != layout::FileKind::Temporary) continue;
    // Old enough to belong to a dead writer, or (this host) its writer is known to be gone.
    const bool dead_writer = f.mtime < grace_cutoff &&
                             temp_files::writer_state(f.path.filename().string()) == temp_files::WriterState::Gone;
    if (f.mtime >= cutoff && !dead_writer) continue;
    if (int err = posix::remove_file(f.path)) {
      log::warn("attnjit cache: cannot remove stale temporary {}: {}", f.path.string(), posix::errno_text(err));
      continue;
    }
    log::info("attnjit cache: removed stale temporary {} (its writer died)", f.path.string());
    ++reaped;
  }
  return reaped;
}

}  // namespace attnjit::cache

// attnjit cache pack: verified entries of a cache folder -> one tar archive.
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <set>
#include <unistd.h>

#include "attnjit/error.hpp"
#include "cache/archive.hpp"
#include "cache/archive_io.hpp"
#include "cache/cache_layout.hpp"
#include "cache/entry_format.hpp"
#include "cache/posix_io.hpp"

namespace attnjit::cache::archive {

namespace {

namespace fs = std::filesystem;

std::string iso_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

struct Verified {
  fs::path path;
  std::string arch, key;
};

// Reads and verifies one entry file; "" when it is sound.
std::string read_verified(const fs::path& path, const std::string& arch, const std::string& key,
                          std::string& bytes, Entry& entry) {
  if (int err = posix::read_file(path, bytes); err != 0) return "cannot read: " + posix::errno_text(err);
  return entry_format::parse_entry(bytes, arch, key, entry);
}

std::string metadata_string(const Entry& e, const char* field) {
  if (!e.metadata.is_object()) return {};
  auto it = e.metadata.find(field);
  return it != e.metadata.end() && it->is_string() ? it->get<std::string>() : std::string();
}

class ArchiveWriter {
 public:
  ArchiveWriter(const fs::path& path, Compression c) : path_(path), a_(archive_write_new()) {
    if (!a_) throw Error(Status::CacheError, "libarchive: out of memory");
    int r = archive_write_set_format_pax_restricted(a_.get());
    if (r == ARCHIVE_OK && c == Compression::Zstd) r = archive_write_add_filter_zstd(a_.get());
    if (r == ARCHIVE_OK && c == Compression::Gzip) r = archive_write_add_filter_gzip(a_.get());
    if (r == ARCHIVE_OK) r = archive_write_open_filename(a_.get(), path.c_str());
    if (r != ARCHIVE_OK) fail("open");
  }
  void add(const std::string& name, const std::string& bytes) {
    io::EntryPtr e(archive_entry_new());
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(bytes.size()));
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_mtime(e.get(), std::time(nullptr), 0);
    if (archive_write_header(a_.get(), e.get()) != ARCHIVE_OK) fail("write the header of " + name);
    if (archive_write_data(a_.get(), bytes.data(), bytes.size()) != static_cast<la_ssize_t>(bytes.size()))
      fail("write " + name);
  }
  void close() {
    if (archive_write_close(a_.get()) != ARCHIVE_OK) fail("finish");
  }

 private:
  [[noreturn]] void fail(const std::string& step) {
    throw Error(Status::CacheError, fmt::format("cannot {} the archive {}: {}", step, path_.string(),
                                                io::error_text(a_.get())));
  }
  fs::path path_;
  io::Writer a_;
};

}  // namespace

PackReport pack(const fs::path& cache_dir, const fs::path& out, const std::string& arch) {
  const Compression compression = compression_for(out, "OUT");
  if (!arch.empty()) layout::check_arch(arch);
  PackReport report;
  Manifest& m = report.manifest;
  std::set<std::string> archs, nvrtcs, versions;

  // Pass 1 verifies everything, so the manifest (the first member) can say
  // what the archive holds. Entries are immutable once published; one can
  // only vanish (eviction) before pass 2, which verifies again.
  std::vector<Verified> good;
  for (const auto& f : layout::scan(cache_dir)) {
    if (f.kind != layout::FileKind::Entry || (!arch.empty() && f.arch != arch)) continue;
    std::string bytes;
    Entry e;
    if (auto problem = read_verified(f.path, f.arch, f.key, bytes, e); !problem.empty()) {
      ++report.skipped;
      report.problems.push_back(fmt::format("{}: {}", f.path.string(), problem));
      continue;
    }
    good.push_back({f.path, f.arch, f.key});
    archs.insert(f.arch);
    if (auto v = metadata_string(e, "nvrtc_version"); !v.empty()) nvrtcs.insert(v);
    if (auto v = metadata_string(e, "attnjit_version"); !v.empty()) versions.insert(v);
    m.bytes += bytes.size();
  }
  m.entries = good.size();
  m.packed_by = ATTNJIT_VERSION_STRING;
  m.created = iso_now();
  m.archs.assign(archs.begin(), archs.end());
  m.nvrtc_versions.assign(nvrtcs.begin(), nvrtcs.end());
  m.attnjit_versions.assign(versions.begin(), versions.end());

  // Written beside the target and renamed, so a reader never sees half an archive.
  const fs::path tmp = out.string() + fmt::format(".tmp.{}", ::getpid());
  try {
    ArchiveWriter w(tmp, compression);
    w.add(kManifestName, m.to_json().dump(2) + "\n");
    for (const auto& g : good) {
      std::string bytes;
      Entry e;
      if (auto problem = read_verified(g.path, g.arch, g.key, bytes, e); !problem.empty())
        throw Error(Status::CacheError, fmt::format("{} changed while packing ({}); pack again", g.path.string(),
                                                    problem));
      w.add(fmt::format("entries/{}/{}.cubin", g.arch, g.key), bytes);
    }
    w.close();
    std::error_code ec;
    fs::rename(tmp, out, ec);
    if (ec) throw Error(Status::CacheError, fmt::format("cannot rename {} to {}: {}", tmp.string(), out.string(),
                                                        ec.message()));
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  return report;
}

}  // namespace attnjit::cache::archive

// attnjit cache unpack: a tar archive from `pack` -> verified entries in a cache.
#include <fmt/format.h>

#include <functional>
#include <regex>

#include "attnjit/error.hpp"
#include "cache/archive.hpp"
#include "cache/archive_io.hpp"
#include "cache/cache_layout.hpp"
#include "cache/entry_format.hpp"

namespace attnjit::cache::archive {

namespace {

namespace fs = std::filesystem;

// The only entry name accepted: entries/<arch>/<key>.cubin, each part in the
// layout's alphabet (no '/', no '.'), so no member can name a path outside
// the cache. The path written is built from the parts, not from the name.
bool parse_member_name(const std::string& name, std::string& arch, std::string& key) {
  static const std::regex kEntry("entries/([A-Za-z0-9_-]+)/([0-9a-f]{64})\\.cubin");
  std::smatch m;
  if (!std::regex_match(name, m, kEntry)) return false;
  arch = m[1];
  key = m[2];
  try {
    layout::check_arch(arch);
    layout::check_key(key);
  } catch (const Error&) {
    return false;
  }
  return true;
}

class ArchiveReader {
 public:
  explicit ArchiveReader(const fs::path& path) : path_(path), a_(archive_read_new()) {
    if (!a_) throw Error(Status::CacheError, "libarchive: out of memory");
    archive_read_support_filter_all(a_.get());
    archive_read_support_format_tar(a_.get());
    if (archive_read_open_filename(a_.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) not_an_archive();
  }
  // The next member's header, or nullptr at the end.
  struct archive_entry* next() {
    struct archive_entry* e = nullptr;
    const int r = archive_read_next_header(a_.get(), &e);
    if (r == ARCHIVE_EOF) return nullptr;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) not_an_archive();
    return e;
  }
  // The current member's data, at most `limit` bytes; false when longer.
  bool data(std::string& out, uint64_t limit) {
    out.clear();
    char buf[1 << 16];
    for (;;) {
      const la_ssize_t n = archive_read_data(a_.get(), buf, sizeof buf);
      if (n < 0) not_an_archive();
      if (n == 0) return true;
      if (out.size() + static_cast<uint64_t>(n) > limit) return false;
      out.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  [[noreturn]] void not_an_archive() {
    throw Error(Status::InvalidArgument, fmt::format("IN='{}' cannot be read as a tar archive: {}", path_.string(),
                                                     io::error_text(a_.get())));
  }
  fs::path path_;
  io::Reader a_;
};

// One member after the manifest, judged: a verified entry, or refused and why.
struct Member {
  std::string name;
  std::string refused;  // empty: `entry` verified against the member's arch and key
  Entry entry;
};

// Reads `in` start to end: the manifest (returned), then each regular-file
// member through `each`. Throws Error(InvalidArgument) when `in` is not an
// attnjit cache archive or cannot be read to its end (truncated, damaged).
Manifest read_archive(const fs::path& in, const std::function<void(const Member&)>& each) {
  ArchiveReader r(in);
  Manifest manifest;

  // The manifest comes first, so mismatches are known before anything is written.
  struct archive_entry* e = r.next();
  std::string bytes;
  const std::string first = e ? archive_entry_pathname(e) : "";
  std::string problem = "it has no " + std::string(kManifestName) + " as its first member";
  if (e && first == kManifestName && archive_entry_filetype(e) == AE_IFREG && r.data(bytes, 1 << 20)) {
    const nlohmann::json j = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
    problem = Manifest::from_json(j, manifest);
  }
  if (!problem.empty())
    throw Error(Status::InvalidArgument,
                fmt::format("IN='{}' is not an attnjit cache archive: {}", in.string(), problem));

  while ((e = r.next()) != nullptr) {
    Member m;
    m.name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "(no name)";
    std::string arch, key;
    // Folder members (tar adds them when an operator repacks by hand) write
    // nothing here: entry paths come from the layout, so they are skipped.
    if (archive_entry_filetype(e) == AE_IFDIR) continue;
    if (archive_entry_filetype(e) != AE_IFREG)
      m.refused = "not a regular file (links and devices are never part of a cache archive)";
    else if (!parse_member_name(m.name, arch, key))
      m.refused = "not a cache entry name (entries/<arch>/<64 hex digit key>.cubin); it could name a path "
                  "outside the cache";
    else if (!r.data(bytes, kMaxMemberBytes))
      m.refused = fmt::format("larger than {} bytes, which no cubin is", kMaxMemberBytes);
    else
      m.refused = entry_format::parse_entry(bytes, arch, key, m.entry);
    each(m);
  }
  return manifest;
}

}  // namespace

// Two passes: the first reads the whole archive and judges every member,
// writing nothing, so a truncated or damaged archive installs nothing (the
// cache stays as it was and a second try with a good copy installs it all);
// the second installs the verified entries. Refused members are per-entry
// verdicts of a readable archive: they are named, and the rest go in.
UnpackReport unpack(const fs::path& in, DiskCache& into, const LocalVersions& local) {
  if (!into.writable())
    throw Error(Status::CacheError,
                fmt::format("the cache {} is not writable (mode {}); unpack needs to write it",
                            into.config().dir, to_string(into.config().mode)));
  UnpackReport report;
  size_t members = 0;
  try {
    report.manifest = read_archive(in, [&](const Member& m) {
      ++members;
      if (m.refused.empty()) return;
      ++report.refused;
      report.problems.push_back(fmt::format("{}: {}", m.name, m.refused));
    });
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}; nothing was installed (an archive is read whole before any entry is "
                                        "written)", e.what()));
  }
  // A tar cut at a member boundary reads as a clean end: only the count shows it.
  if (members < report.manifest.entries)
    throw Error(Status::InvalidArgument,
                fmt::format("IN='{}' is incomplete: its manifest lists {} entries, it holds {} (truncated?); "
                            "nothing was installed",
                            in.string(), report.manifest.entries, members));
  report.warnings = compare(report.manifest, local);

  const auto counts = [&] {
    return fmt::format("{} of the archive's {} entries were installed and {} already present before this; the "
                       "rest were not installed (each installed entry is complete and verified)",
                       report.installed, report.manifest.entries, report.present);
  };
  try {
    read_archive(in, [&](const Member& m) {
      if (!m.refused.empty()) return;  // counted by the first pass
      if (into.load(m.entry.arch, m.entry.key)) {
        ++report.present;
        return;
      }
      if (!into.store(m.entry))
        throw Error(Status::CacheError, fmt::format("cannot write {} into {} (see the warning above)", m.name,
                                                    into.config().dir));
      ++report.installed;
    });
  } catch (const Error& e) {
    // The file changed since the first pass, or a write failed (disk full).
    throw Error(e.status() == Status::InvalidArgument ? Status::CacheError : e.status(),
                fmt::format("{}; {}", e.what(), counts()));
  }
  return report;
}

}  // namespace attnjit::cache::archive

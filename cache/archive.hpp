// Shippable caches: a prewarmed cache folder packed into one tar file
// (optionally zstd- or gzip-compressed), and unpacked on another machine.
//
// Archive layout (tar, pax format):
//   manifest.json                       first member: who built the entries (see Manifest)
//   entries/<arch>/<key>.cubin          one member per entry, the entry file's exact bytes
//
// Trust: the archive is input from elsewhere. pack takes only entries that
// verify; unpack verifies every entry again (entry_format::parse_entry: hashes,
// and key and arch equal to the member's name) and installs it through
// DiskCache::store at the path the layout derives from the validated arch and
// key, never at a path taken from the archive. Any other member (links,
// devices, "../x", absolute names) is refused and counted, so nothing can be
// written outside the cache folder; folder members are skipped (they write
// nothing).
//
// libarchive does the tar and compression work; this code lives outside
// libattnjit.so (its own static library, for the CLI and the tests) so that
// serving engines do not inherit a libarchive dependency.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"

namespace attnjit::cache::archive {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kManifestName = "manifest.json";
// A cubin is a few hundred KiB; anything this large is not an entry.
inline constexpr uint64_t kMaxMemberBytes = 256ull << 20;

// What an archive says about its entries; the sets are drawn from the
// entries' own metadata, so they describe the machine that compiled them.
struct Manifest {
  int format_version = kFormatVersion;
  std::string packed_by;                       // attnjit version of the packer
  std::string created;                         // ISO 8601 UTC
  size_t entries = 0;
  uint64_t bytes = 0;                          // total entry bytes
  std::vector<std::string> archs;              // sorted, unique
  std::vector<std::string> nvrtc_versions;     // sorted, unique ("" entries omitted)
  std::vector<std::string> attnjit_versions;   // sorted, unique

  nlohmann::json to_json() const;
  // Empty string when `j` is a manifest this code understands, else why not.
  static std::string from_json(const nlohmann::json& j, Manifest& out);
};

// The unpacking machine, to compare the manifest with. An empty field is not
// compared (e.g. no GPU: no archs).
struct LocalVersions {
  std::string attnjit;
  std::string nvrtc;
  std::vector<std::string> archs;
};

// Sentences for each mismatch between the manifest and this machine, saying
// what follows from it (the cache key includes the attnjit and NVRTC
// versions, so a mismatch means every lookup misses).
std::vector<std::string> compare(const Manifest& m, const LocalVersions& local);

enum class Compression { None, Zstd, Gzip };
// From the file name: .tar, .tar.zst / .tzst, .tar.gz / .tgz. Throws
// Error(InvalidArgument) naming `arg`, the value and the allowed endings.
Compression compression_for(const std::filesystem::path& path, const char* arg);

struct PackReport {
  Manifest manifest;
  size_t skipped = 0;                 // entries that did not verify (left out)
  std::vector<std::string> problems;  // one line per skipped entry
};

// Packs every verified entry of `cache_dir` (only those of `arch`, if not
// empty) into `out`, written to a temporary file and renamed into place.
// Throws Error(CacheError) when the folder cannot be read or `out` written.
PackReport pack(const std::filesystem::path& cache_dir, const std::filesystem::path& out,
                const std::string& arch = {});

struct UnpackReport {
  Manifest manifest;
  size_t installed = 0;               // new entries written
  size_t present = 0;                 // already in the cache, verified
  size_t refused = 0;                 // members that failed verification or are not entries
  std::vector<std::string> problems;  // one line per refused member
  std::vector<std::string> warnings;  // compare(manifest, local)
};

// Verifies and installs every entry of `in` into `into` (which must be
// writable: Error(CacheError) otherwise). The whole archive is read and
// judged before anything is written: Error(InvalidArgument), nothing
// installed, when `in` is not an attnjit cache archive (unreadable, not tar,
// no manifest first) or is damaged (truncated, or fewer entry members than
// its manifest lists). A member that fails verification is refused and
// counted; the rest still go in. A write that fails while installing (a full
// disk) throws Error(CacheError) saying how many entries were installed
// before it; each of those is complete (atomic publish).
UnpackReport unpack(const std::filesystem::path& in, DiskCache& into, const LocalVersions& local);

}  // namespace attnjit::cache::archive

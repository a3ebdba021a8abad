#include "cache/cache_layout.hpp"

#include <fmt/format.h>

#include <system_error>

#include "attnjit/error.hpp"

namespace attnjit::cache::layout {

namespace {

constexpr size_t kMaxKeyChars = 128, kMaxArchChars = 32;

bool name_chars_ok(const std::string& s) {
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

bool valid_key(const std::string& k) { return k.size() >= 2 && k.size() <= kMaxKeyChars && name_chars_ok(k); }
bool valid_arch(const std::string& a) { return !a.empty() && a.size() <= kMaxArchChars && name_chars_ok(a); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Classifies a file name found in <arch>/<shard>/; false for anything foreign.
bool classify(const std::string& name, const std::string& shard, FileKind& kind, std::string& key) {
  if (ends_with(name, ".cubin")) {
    kind = FileKind::Entry;
    key = name.substr(0, name.size() - 6);
  } else if (ends_with(name, ".lock")) {
    kind = FileKind::Lock;
    key = name.substr(0, name.size() - 5);
  } else if (name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos) {
    kind = FileKind::Temporary;
    key = name.substr(1, name.find(".tmp.") - 1);
  } else {
    return false;
  }
  return valid_key(key) && key.compare(0, 2, shard) == 0;
}

[[noreturn]] void throw_unreadable(const fs::path& p, const std::error_code& ec) {
  throw Error(Status::CacheError, fmt::format("attnjit cache: cannot read folder {}: {}", p.string(), ec.message()));
}

std::vector<fs::path> subdirs(const fs::path& p) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::directory_iterator it(p, ec), end;
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) return out;
    throw_unreadable(p, ec);
  }
  for (; it != end; it.increment(ec)) {
    if (ec) throw_unreadable(p, ec);
    std::error_code sec;
    if (it->is_directory(sec)) out.push_back(it->path());
  }
  return out;
}

// A cache path that exists as something other than a folder is a wrong
// setting: listing it as an empty cache would answer "0 entries, 0 ok".
void check_is_folder(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);  // follows a link to a folder
  if (ec || st.type() == fs::file_type::not_found || st.type() == fs::file_type::directory) return;
  const char* what = st.type() == fs::file_type::regular ? "a regular file" : "not a folder";
  throw Error(Status::InvalidArgument,
              fmt::format("{} is not a cache directory: it is {}; point --cache-dir or ATTNJIT_CACHE_DIR at a folder",
                          dir.string(), what));
}

}  // namespace

void check_key(const std::string& key) {
  if (!valid_key(key))
    throw Error(Status::InvalidArgument,
                fmt::format("cache key '{}' is not allowed: it must be 2 to {} characters from [A-Za-z0-9_-] "
                            "(normally 64 lower-case hex digits)", key, kMaxKeyChars));
}

void check_arch(const std::string& arch) {
  if (!valid_arch(arch))
    throw Error(Status::InvalidArgument,
                fmt::format("cache arch '{}' is not allowed: it must be 1 to {} characters from [A-Za-z0-9_-] "
                            "(e.g. sm_90a)", arch, kMaxArchChars));
}

fs::path entry_path(const fs::path& dir, const std::string& arch, const std::string& key) {
  check_arch(arch);
  check_key(key);
  return dir / arch / key.substr(0, 2) / (key + ".cubin");
}

fs::path lock_path(const fs::path& dir, const std::string& arch, const std::string& key) {
  check_arch(arch);
  check_key(key);
  return dir / arch / key.substr(0, 2) / (key + ".lock");
}

std::string temp_prefix(const std::string& key) { return "." + key + ".tmp."; }

std::vector<FoundFile> scan(const fs::path& dir) {
  check_is_folder(dir);
  std::vector<FoundFile> out;
  for (const auto& arch_dir : subdirs(dir)) {
    const std::string arch = arch_dir.filename().string();
    if (!valid_arch(arch)) continue;
    for (const auto& shard_dir : subdirs(arch_dir)) {
      const std::string shard = shard_dir.filename().string();
      std::error_code ec;
      fs::directory_iterator it(shard_dir, ec), end;
      if (ec) {
        // Removed under us by another process's clear: nothing left to find.
        if (ec == std::errc::no_such_file_or_directory) continue;
        throw_unreadable(shard_dir, ec);
      }
      for (; it != end; it.increment(ec)) {
        if (ec) throw_unreadable(shard_dir, ec);
        FoundFile f;
        if (!classify(it->path().filename().string(), shard, f.kind, f.key)) continue;
        std::error_code sec;
        if (!it->is_regular_file(sec)) continue;
        f.bytes = it->file_size(sec);
        if (sec) continue;  // vanished between listing and stat: another process evicted it
        f.mtime = it->last_write_time(sec);
        if (sec) continue;
        f.path = it->path();
        f.arch = arch;
        out.push_back(std::move(f));
      }
    }
  }
  return out;
}

}  // namespace attnjit::cache::layout

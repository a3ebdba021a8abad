// Where things live in the cache folder, and how to find them again:
//   <dir>/<arch>/<key[0:2]>/<key>.cubin           an entry
//   <dir>/<arch>/<key[0:2]>/<key>.lock            its cross-process lock
//   <dir>/<arch>/<key[0:2]>/.<key>.tmp.<pid>.<r>  a write in progress (or abandoned)
// Keys and arches are restricted to [A-Za-z0-9_-], so no name can climb out of
// the folder and the three kinds of file can never be mistaken for each other.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace attnjit::cache::layout {

namespace fs = std::filesystem;

// Throw Error(InvalidArgument) naming the value and what is allowed.
void check_key(const std::string& key);
void check_arch(const std::string& arch);

fs::path entry_path(const fs::path& dir, const std::string& arch, const std::string& key);
fs::path lock_path(const fs::path& dir, const std::string& arch, const std::string& key);
std::string temp_prefix(const std::string& key);  // ".<key>.tmp."

enum class FileKind { Entry, Lock, Temporary };
struct FoundFile {
  fs::path path;
  FileKind kind;
  std::string arch, key;
  uint64_t bytes = 0;
  fs::file_time_type mtime;
};

// Every entry, lock and temporary file under `dir` (missing dir: none).
// Files that fit none of the patterns are left alone. A folder that cannot be
// read throws Error(CacheError) naming it; a `dir` that exists but is not a
// folder (a regular file) throws Error(InvalidArgument) naming it.
std::vector<FoundFile> scan(const fs::path& dir);

}  // namespace attnjit::cache::layout

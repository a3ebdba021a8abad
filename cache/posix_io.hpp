// Thin POSIX file helpers for the cache. They return errno values instead of
// throwing, because the cache decides per errno whether a failure degrades to
// memory-only (permissions, read-only media, full disk) or is a real error.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace attnjit::cache::posix {

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset();

 private:
  int fd_ = -1;
};

std::string errno_text(int err);

// Identity of an inode, to tell whether a path still names the file we opened.
struct FileId {
  uint64_t dev = 0, ino = 0;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

// Reads a whole file. Returns 0 or an errno; `id` receives the inode read.
int read_file(const std::filesystem::path& path, std::string& out, FileId* id = nullptr);
// Reads at most `size` bytes from the start of a file (short at end of file).
int read_head(const std::filesystem::path& path, size_t size, std::string& out, uint64_t* file_size);
// Returns 0 or errno; ENOENT when the path does not exist.
int stat_id(const std::filesystem::path& path, FileId& id);
int write_all(int fd, std::string_view bytes);
// mkdir -p; returns 0 or the errno of the first component that failed.
int make_dirs(const std::filesystem::path& dir);
// fsync on a directory, so a rename inside it survives a crash.
int fsync_dir(const std::filesystem::path& dir);
// Sets the modification time to now (the cache's LRU clock).
int touch_mtime(const std::filesystem::path& path);
// unlink(); ENOENT counts as success (someone else removed it first).
int remove_file(const std::filesystem::path& path);

}  // namespace attnjit::cache::posix

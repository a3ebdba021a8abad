#include "cache/posix_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace attnjit::cache::posix {

namespace fs = std::filesystem;

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string errno_text(int err) { return std::generic_category().message(err); }

namespace {
int open_retry(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do fd = ::open(path, flags, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

// Reads up to `limit` bytes; returns 0 or errno.
int read_upto(int fd, size_t limit, std::string& out) {
  out.clear();
  char buf[1 << 16];
  while (out.size() < limit) {
    size_t want = std::min(sizeof buf, limit - out.size());
    ssize_t n = ::read(fd, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return 0;
}
}  // namespace

int read_file(const fs::path& path, std::string& out, FileId* id) {
  Fd fd(open_retry(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno;
  if (!S_ISREG(st.st_mode)) return EISDIR;
  if (id) *id = FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  out.reserve(static_cast<size_t>(st.st_size));
  // Read to end of file rather than st_size bytes: the size is only a hint.
  return read_upto(fd.get(), SIZE_MAX, out);
}

int read_head(const fs::path& path, size_t size, std::string& out, uint64_t* file_size) {
  Fd fd(open_retry(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno;
  if (file_size) *file_size = static_cast<uint64_t>(st.st_size);
  return read_upto(fd.get(), size, out);
}

int stat_id(const fs::path& path, FileId& id) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno;
  id = FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  return 0;
}

int write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

int make_dirs(const fs::path& dir) {
  if (dir.empty()) return 0;
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  if (errno != ENOENT) return errno;
  if (dir.has_parent_path() && dir.parent_path() != dir) {
    if (int err = make_dirs(dir.parent_path())) return err;
  }
  // 0777 less the umask: a group-shared cache (umask 002, setgid folder) stays group-writable.
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) return errno;
  return 0;
}

int fsync_dir(const fs::path& dir) {
  Fd fd(open_retry(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno;
  if (::fsync(fd.get()) != 0) return errno;
  return 0;
}

int touch_mtime(const fs::path& path) {
  struct timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT;  // atime is not ours: noatime mounts and readers move it
  times[1].tv_sec = 0;
  times[1].tv_nsec = UTIME_NOW;
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) return errno;
  return 0;
}

int remove_file(const fs::path& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return errno;
  return 0;
}

}  // namespace attnjit::cache::posix

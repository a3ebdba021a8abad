#include "cache/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace attnjit::cache {

int FileLock::lock(const std::filesystem::path& path, Wait wait) {
  unlock();
  for (;;) {
    // 0666 less the umask, so a group-shared folder's locks are group-writable.
    posix::Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
    if (!fd.valid() && (errno == EACCES || errno == EPERM || errno == EROFS)) {
      // Another user's lock file that we may not write (their umask made it
      // 0644). flock needs no write access on the file, only an open
      // descriptor, so a read-only one locks it just as well: the lock then
      // still excludes that user's processes, instead of turning ours
      // memory-only for the whole run.
      const int create_err = errno;
      fd = posix::Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid() && errno == ENOENT) return create_err;  // no file, and we may not create one
    }
    if (!fd.valid()) {
      if (errno == EINTR) continue;
      return errno;
    }
    const int op = LOCK_EX | (wait == Wait::DontBlock ? LOCK_NB : 0);
    int rc;
    do rc = ::flock(fd.get(), op);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) return errno;
    // The file we locked may have been unlinked (remove_while_held) between
    // our open and our flock; then it no longer guards anything: start over.
    struct stat held {}, named {};
    if (::fstat(fd.get(), &held) != 0) return errno;
    if (::stat(path.c_str(), &named) != 0) {
      if (errno != ENOENT) return errno;
      continue;
    }
    if (named.st_dev == held.st_dev && named.st_ino == held.st_ino) {
      fd_ = std::move(fd);
      return 0;
    }
  }
}

int FileLock::remove_while_held(const std::filesystem::path& path) {
  int err = posix::remove_file(path);
  unlock();
  return err;
}

}  // namespace attnjit::cache

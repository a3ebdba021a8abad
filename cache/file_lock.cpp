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
    posix::Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
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

// An exclusive flock(2) on a lock file, held for the object's lifetime: the
// cross-process half of "N processes asking for one kernel compile it once".
//
// flock is tied to the open file description, so two DiskCache objects in one
// process exclude each other just as two processes do, and the kernel drops
// the lock when a holder dies: no stale lock ever needs breaking. A lock file
// this process may not write (another user's) is opened read-only: flock does
// not need write access, so users sharing a folder exclude each other.
#pragma once
#include <filesystem>

#include "cache/posix_io.hpp"

namespace attnjit::cache {

class FileLock {
 public:
  enum class Wait { Block, DontBlock };

  FileLock() = default;
  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;
  ~FileLock() { unlock(); }

  // Creates the lock file if needed and locks it. Returns 0, or an errno:
  // EWOULDBLOCK when `wait` is DontBlock and another holder has it.
  int lock(const std::filesystem::path& path, Wait wait);
  bool held() const { return fd_.valid(); }
  void unlock() { fd_.reset(); }

  // Unlinks the lock file while holding it (callers that tidy up); a holder
  // that later finds the path gone retries on a fresh file, so no two holders
  // ever lock different inodes of one name.
  int remove_while_held(const std::filesystem::path& path);

 private:
  posix::Fd fd_;
};

}  // namespace attnjit::cache

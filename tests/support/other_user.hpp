// Runs a piece of a test as another user (nobody, 65534) in a forked child,
// for the faults that only exist between users: another user's lock file, a
// folder this user may not write. Root ignores permission bits, so this is
// the only faithful way to test them when the suite runs as root (as CI does).
#pragma once
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace attnjit::test {

inline constexpr uid_t kNobody = 65534;

// True when this process can become another user (it is root).
inline bool can_switch_user() { return ::geteuid() == 0; }

// Forks; the child drops to uid/gid 65534 and exits with fn()'s value (or 99
// if dropping failed). Returns the child's exit status, -1 if it did not exit.
inline int as_nobody(const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(99);
    int rc = 98;
    try {
      rc = fn();
    } catch (...) {
    }
    ::_exit(rc);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace attnjit::test

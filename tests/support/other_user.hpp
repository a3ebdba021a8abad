// Runs a piece of a test as another user (nobody, 65534) in a forked child,
// for the faults that only exist between users: another user's lock file, a
// folder this user may not write. Root ignores permission bits, so this is
// the only faithful way to test them when the suite runs as root (as CI does).
#pragma once
#include <catch2/catch.hpp>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>

namespace attnjit::test {

inline constexpr uid_t kNobody = 65534;

// True when this process can become another user (it is root).
inline bool can_switch_user() { return ::geteuid() == 0; }

// run_cli's prefix that runs the attnjit binary as that user (setpriv drops
// the uid, gid and groups).
inline constexpr const char* kCliAsNobody = "setpriv --reuid=65534 --regid=65534 --clear-groups env";

// True when the CLI can be run as that user: this process is root and setpriv
// is installed; else WARNs that the test is skipped.
inline bool can_run_cli_as_nobody() {
  if (can_switch_user() && std::system("command -v setpriv >/dev/null 2>&1") == 0) return true;
  WARN("skipped: needs root and setpriv to act as a second user");
  return false;
}

// `dir` readable and searchable by everyone (0755): the other user reaches what lies under it.
inline void open_to_others(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
}

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

// Cache faults between users and processes: another user's lock file, folders
// that cannot be written (tried, not assumed), `ulimit -f`, and temporaries
// left by a writer killed mid-publish.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>

#include "cache/cache_layout.hpp"
#include "cache/file_lock.hpp"
#include "cache/temp_files.hpp"
#include "cache/write_probe.hpp"
#include "support/other_user.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {
namespace {

using cache::FileLock;

// A pid that certainly names no process: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

void age_file(const fs::path& p, std::chrono::seconds by) {
  fs::last_write_time(p, fs::file_time_type::clock::now() - by);
}

fs::path make_temporary(const fs::path& dir, const std::string& key, const std::string& writer) {
  const fs::path folder = dir / "sm_90a" / key.substr(0, 2);
  fs::create_directories(folder);
  const fs::path p = folder / (cache::layout::temp_prefix(key) + writer + ".0123456789abcdef");
  write_bytes(p, "half-written");
  return p;
}

}  // namespace

TEST_CASE("another user's 0644 lock file still locks: the run does not turn memory-only", "[cache][faults]") {
  if (!can_switch_user()) {
    WARN("skipped: needs root to act as a second user");
    return;
  }
  TempDir dir;
  const fs::path cache_dir = dir.path() / "cache";
  const Entry entry = make_entry("foreign lock");
  // The first user (root, umask 022) leaves a lock file only it may write.
  const fs::path lock_file = cache::layout::lock_path(cache_dir, entry.arch, entry.key);
  fs::create_directories(lock_file.parent_path());
  write_bytes(lock_file, "");
  fs::permissions(lock_file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  // The folder is shared: every user may create files in it.
  for (fs::path p = lock_file.parent_path(); p != dir.path().parent_path(); p = p.parent_path())
    fs::permissions(p, fs::perms::all);

  // As the second user: the lock is taken (read-only open) and the entry stored.
  const int rc = as_nobody([&] {
    FileLock lock;
    if (lock.lock(lock_file, FileLock::Wait::DontBlock) != 0) return 1;
    lock.unlock();
    DiskCache c(config_for(cache_dir));
    CountingProducer producer{entry};
    c.get_or_produce(entry.arch, entry.key, "foreign lock test", producer.fn());
    return c.writable() && fs::exists(c.entry_path(entry.arch, entry.key)) ? 0 : 2;
  });
  CHECK(rc == 0);

  // And the lock still excludes: held by the second user, the first cannot take it.
  FileLock held;
  REQUIRE(held.lock(lock_file, FileLock::Wait::DontBlock) == 0);
  const int blocked = as_nobody([&] {
    FileLock lock;
    return lock.lock(lock_file, FileLock::Wait::DontBlock) == EWOULDBLOCK ? 0 : 1;
  });
  CHECK(blocked == 0);
}

TEST_CASE("new folders, entries and locks take their mode from the umask (group-shared caches)", "[cache][faults]") {
  TempDir dir;
  const mode_t old = ::umask(002);
  DiskCache c(config_for(dir.path() / "cache"));
  const Entry entry = make_entry("umask");
  CountingProducer producer{entry};
  c.get_or_produce(entry.arch, entry.key, "umask test", producer.fn());
  ::umask(old);
  auto mode = [](const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 0777;
  };
  const fs::path entry_file = c.entry_path(entry.arch, entry.key);
  CHECK(mode(entry_file) == 0664);
  CHECK(mode(cache::layout::lock_path(dir.path() / "cache", entry.arch, entry.key)) == 0664);
  CHECK(mode(entry_file.parent_path()) == 0775);
  CHECK(mode(entry_file.parent_path().parent_path()) == 0775);
}

TEST_CASE("writability is found by trying", "[cache][faults]") {
  TempDir dir;
  // Missing: creating it would work, and the probe leaves nothing behind.
  auto missing = cache::probe_writable(dir.path() / "a" / "b");
  CHECK(missing.writable);
  CHECK_FALSE(missing.exists);
  CHECK(cache::describe(missing).rfind("not yet created", 0) == 0);
  CHECK(files_under(dir.path()).empty());
  CHECK(fs::is_empty(dir.path()));

  auto present = cache::probe_writable(dir.path());
  CHECK(present.writable);
  CHECK(cache::describe(present) == "yes");
  CHECK(fs::is_empty(dir.path()));

  // A regular file where the folder should be.
  write_bytes(dir.path() / "file", "x");
  auto file = cache::probe_writable(dir.path() / "file");
  CHECK_FALSE(file.writable);
  CHECK_THAT(cache::describe(file), Catch::Contains("is not a folder"));
  auto under_file = cache::probe_writable(dir.path() / "file" / "cache");
  CHECK_FALSE(under_file.writable);

  if (can_switch_user()) {
    // A folder this user may not write (root's, 0755), and one under it.
    fs::create_directories(dir.path() / "locked");
    fs::permissions(dir.path(), fs::perms::all);
    fs::permissions(dir.path() / "locked", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                               fs::perms::others_read | fs::perms::others_exec);
    const fs::path locked = dir.path() / "locked";
    CHECK(as_nobody([&] {
            auto p = cache::probe_writable(locked);
            auto q = cache::probe_writable(locked / "sub");
            const bool named = p.reason.find("Permission denied") != std::string::npos &&
                               q.reason.find("cannot create") != std::string::npos;
            return !p.writable && !q.writable && named ? 0 : 1;
          }) == 0);
  }
}

TEST_CASE("a store past `ulimit -f` (SIGXFSZ ignored) is a not-writable store, leaving no temporary", "[cache][faults]") {
  TempDir dir;
  const fs::path cache_dir = dir.path() / "cache";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // what the CLI does
    struct rlimit lim {512, 512};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(3);
    DiskCache c(config_for(cache_dir));
    const bool stored = c.store(make_entry("too big", "sm_90a", 8192));
    const bool named = c.not_writable_reason().find("File too large") != std::string::npos;
    ::_exit(!stored && !c.writable() && named ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(files_under(cache_dir).empty());  // the temporary was removed
}

TEST_CASE("temporaries name their writer; a dead writer's are reaped without the 600 s wait", "[cache][faults]") {
  TempDir dir;
  const fs::path cache_dir = dir.path() / "cache";
  DiskCache c(config_for(cache_dir));
  const std::string host = cache::temp_files::this_host();
  const fs::path dead = make_temporary(cache_dir, key_for("dead"), host + "." + std::to_string(dead_pid()));
  const fs::path dead_fresh = make_temporary(cache_dir, key_for("dead fresh"), host + "." + std::to_string(dead_pid()));
  const fs::path alive = make_temporary(cache_dir, key_for("alive"), host + "." + std::to_string(::getpid()));
  const fs::path other_host = make_temporary(cache_dir, key_for("other"), "elsewhere.1");
  const fs::path old_form = make_temporary(cache_dir, key_for("old form"), "1");
  for (const auto& p : {dead, alive, other_host, old_form}) age_file(p, std::chrono::seconds(60));

  CHECK(cache::temp_files::writer_state(dead.filename().string()) == cache::temp_files::WriterState::Gone);
  CHECK(cache::temp_files::writer_state(alive.filename().string()) == cache::temp_files::WriterState::Running);
  CHECK(cache::temp_files::writer_state(other_host.filename().string()) == cache::temp_files::WriterState::Unknown);
  CHECK(cache::temp_files::writer_state(old_form.filename().string()) == cache::temp_files::WriterState::Unknown);

  // Shown by stats and verify, with their writers.
  const auto stats = c.stats();
  REQUIRE(stats.temporaries.size() == 5);
  const auto report = c.verify(false);
  CHECK(report.temporaries.size() == 5);
  bool saw_gone = false;
  for (const auto& t : report.temporaries)
    if (t.path == dead) saw_gone = t.writer.find(": gone") != std::string::npos && t.age.count() >= 59;
  CHECK(saw_gone);

  // Only the dead writer's temporary past the grace period goes.
  CHECK(c.reap_temporaries(DiskCache::kStaleTemporaryAge) == 1);
  CHECK_FALSE(fs::exists(dead));
  for (const auto& p : {dead_fresh, alive, other_host, old_form}) CHECK(fs::exists(p));
  // Age still reaps everything old, whoever wrote it.
  for (const auto& p : {dead_fresh, alive, other_host, old_form}) age_file(p, std::chrono::seconds(700));
  CHECK(c.reap_temporaries(DiskCache::kStaleTemporaryAge) == 4);
}

TEST_CASE("a publish names its temporary after this host and pid", "[cache][faults]") {
  const auto w = cache::temp_files::writer_of(".abcd.tmp." + cache::temp_files::writer_tag() + "0123456789abcdef");
  REQUIRE(w);
  CHECK(w->host == cache::temp_files::this_host());
  CHECK(w->pid == ::getpid());
  CHECK_FALSE(cache::temp_files::writer_of(".abcd.tmp.host.notapid.x"));
  CHECK_FALSE(cache::temp_files::writer_of(".abcd.tmp."));
  CHECK_FALSE(cache::temp_files::writer_of("abcd.cubin"));
}

}  // namespace attnjit::test

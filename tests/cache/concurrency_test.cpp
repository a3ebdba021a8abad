// "Compile once": several processes, or several threads of one process,
// asking for one missing key run produce() exactly once and all get the
// same bytes.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "attnjit/error.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

namespace {

// Runs in a forked child: no Catch2 here, the exit status is the verdict.
int race_in_child(const CacheConfig& config, const Entry& entry, const fs::path& counter, const fs::path& result) {
  try {
    DiskCache c(config);
    auto [got, source] = c.get_or_produce(entry.arch, entry.key, "raced kernel", [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const int fd = ::open(counter.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
      const std::string line = std::to_string(::getpid()) + "\n";
      if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
      ::close(fd);
      return entry;
    });
    std::ofstream(result) << sha256_hex(got.cubin.data(), got.cubin.size()) << "\n";
    return 0;
  } catch (...) {
    return 3;
  }
}

size_t count_lines(const fs::path& p) {
  std::ifstream in(p);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace

TEST_CASE("processes racing on one key produce it once", "[cache][concurrency]") {
  TempDir dir;
  const CacheConfig config = config_for(dir.path() / "cache");
  const Entry entry = make_entry("raced by processes", "sm_90a", 8192);
  const fs::path counter = dir.path() / "produce_calls";
  constexpr int kChildren = 4;

  // Children block on a pipe until the parent closes it, so they start together.
  int start[2];
  REQUIRE(::pipe(start) == 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(start[1]);
      char c;
      while (::read(start[0], &c, 1) < 0 && errno == EINTR) {}
      _exit(race_in_child(config, entry, counter, dir.path() / ("result." + std::to_string(i))));
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  ::close(start[1]);

  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CHECK(count_lines(counter) == 1);
  const std::string want = sha256_hex(entry.cubin.data(), entry.cubin.size()) + "\n";
  for (int i = 0; i < kChildren; ++i) CHECK(read_bytes(dir.path() / ("result." + std::to_string(i))) == want);
}

TEST_CASE("threads racing on one key produce it once", "[cache][concurrency]") {
  TempDir dir;
  DiskCache c(config_for(dir.path()));
  const Entry entry = make_entry("raced by threads", "sm_90a", 8192);
  std::atomic<int> calls{0};
  std::promise<void> go;
  std::shared_future<void> started = go.get_future().share();

  constexpr int kThreads = 8;
  std::vector<std::future<Entry>> results;
  for (int i = 0; i < kThreads; ++i)
    results.push_back(std::async(std::launch::async, [&] {
      started.wait();
      return c.get_or_produce(entry.arch, entry.key, "raced kernel", [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ++calls;
        return entry;
      }).first;
    }));
  go.set_value();
  for (auto& r : results) CHECK(r.get().cubin == entry.cubin);
  CHECK(calls == 1);
}

TEST_CASE("threads waiting on a produce() that throws get its error, and a later call retries", "[cache][concurrency]") {
  TempDir dir;
  DiskCache c(config_for(dir.path()));
  const Entry entry = make_entry("fails once");
  std::atomic<int> calls{0};
  std::promise<void> go;
  std::shared_future<void> started = go.get_future().share();

  std::vector<std::future<Status>> results;
  for (int i = 0; i < 4; ++i)
    results.push_back(std::async(std::launch::async, [&] {
      started.wait();
      try {
        c.get_or_produce(entry.arch, entry.key, "failing kernel", [&]() -> Entry {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          ++calls;
          throw Error(Status::CompileError, "nvrtc: error in generated code");
        });
        return Status::Ok;
      } catch (const Error& e) {
        return e.status();
      }
    }));
  go.set_value();
  for (auto& r : results) CHECK(r.get() == Status::CompileError);
  CHECK(calls == 1);

  CountingProducer producer{entry};
  CHECK(c.get_or_produce(entry.arch, entry.key, "now fixed", producer.fn()).second == DiskCache::Source::Produced);
  CHECK(producer.calls == 1);
}

}  // namespace attnjit::test

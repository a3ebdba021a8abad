// Shared fixtures for the [cache] tests: a fresh temporary folder per test,
// a capture of the library's log, and entries with realistic fields.
#pragma once
#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"
#include "log.hpp"
#include "sha256.hpp"

namespace attnjit::test {

namespace fs = std::filesystem;
using cache::DiskCache;
using cache::Entry;

// mkdtemp folder, removed with its contents (permissions restored first).
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/attnjit-cache-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_directory(ec)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Routes the library's log into a string for the test's lifetime (and keeps
// the expected warnings out of the test run's stderr).
class LogCapture {
 public:
  LogCapture()
      : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_)),
        saved_sinks_(log::get().sinks()),
        saved_level_(log::get().level()) {
    log::get().sinks() = {sink_};
    log::get().set_level(spdlog::level::warn);
  }
  ~LogCapture() {
    log::get().sinks() = saved_sinks_;
    log::get().set_level(saved_level_);
  }
  std::string text() {
    log::get().flush();
    return stream_.str();
  }
  // Lines that contain `needle`.
  size_t count(const std::string& needle) {
    std::istringstream in(text());
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
    return n;
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::vector<spdlog::sink_ptr> saved_sinks_;
  spdlog::level::level_enum saved_level_;
};

inline std::string key_for(const std::string& seed) { return sha256_hex(seed); }

// Payload bytes that differ per seed, so a mix-up between entries shows.
inline std::vector<char> payload_for(const std::string& seed, size_t bytes) {
  std::vector<char> out;
  std::string block = seed;
  while (out.size() < bytes) {
    block = sha256_hex(block);
    out.insert(out.end(), block.begin(), block.end());
  }
  out.resize(bytes);
  return out;
}

inline Entry make_entry(const std::string& seed, const std::string& arch = "sm_90a", size_t bytes = 1000) {
  Entry e;
  e.key = key_for(seed);
  e.arch = arch;
  e.kernel_names = {"attnjit_decode_" + seed.substr(0, 8), "attnjit_merge_states"};
  e.shared_mem_bytes = 49152;
  e.metadata = {{"spec", {{"op", "single_decode"}, {"head_dim", 128}, {"seed", seed}}},
                {"nvrtc", {{"version", "12.4"}, {"options", {"--gpu-architecture=" + arch, "-default-device"}}}},
                {"compile_seconds", 0.25},
                {"created", "2024-05-01T12:00:00Z"}};
  e.cubin = payload_for(seed, bytes);
  return e;
}

inline CacheConfig config_for(const fs::path& dir, CacheMode mode = CacheMode::ReadWrite,
                              uint64_t max_bytes = 1ull << 30) {
  CacheConfig c;
  c.dir = dir.string();
  c.mode = mode;
  c.max_bytes = max_bytes;
  return c;
}

inline void check_same(const Entry& got, const Entry& want) {
  CHECK(got.key == want.key);
  CHECK(got.arch == want.arch);
  CHECK(got.kernel_names == want.kernel_names);
  CHECK(got.shared_mem_bytes == want.shared_mem_bytes);
  CHECK(got.metadata == want.metadata);
  CHECK(got.cubin == want.cubin);
}

inline std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline void flip_byte(const fs::path& p, size_t at) {
  std::string b = read_bytes(p);
  REQUIRE(at < b.size());
  b[at] = static_cast<char>(b[at] ^ 0x20);
  write_bytes(p, b);
}

// Every file under `dir`, for tests that count temporaries or lock files.
inline std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file()) out.push_back(it->path());
  return out;
}

// Counts produce() calls and hands back a fixed entry.
struct CountingProducer {
  Entry entry;
  int calls = 0;
  std::function<Entry()> fn() {
    return [this] {
      ++calls;
      return entry;
    };
  }
};

}  // namespace attnjit::test

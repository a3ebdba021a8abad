// DiskCache store and load against real files: layout, round trip, and
// rejection of an entry filed under the wrong key or arch.
#include "attnjit/error.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

TEST_CASE("store then load returns every field from <dir>/<arch>/<key[0:2]>/<key>.cubin", "[cache]") {
  TempDir dir;
  DiskCache c(config_for(dir.path()));
  const Entry e = make_entry("stored");

  CHECK_FALSE(c.load(e.arch, e.key).has_value());
  REQUIRE(c.store(e));

  const fs::path want = dir.path() / "sm_90a" / e.key.substr(0, 2) / (e.key + ".cubin");
  CHECK(c.entry_path(e.arch, e.key) == want);
  CHECK(fs::is_regular_file(want));
  // Nothing but the entry itself: the temporary was renamed, not copied.
  CHECK(files_under(dir.path()) == std::vector<fs::path>{want});

  auto got = c.load(e.arch, e.key);
  REQUIRE(got.has_value());
  check_same(*got, e);

  SECTION("a second cache object on the same folder sees it") {
    DiskCache other(config_for(dir.path()));
    auto again = other.load(e.arch, e.key);
    REQUIRE(again.has_value());
    check_same(*again, e);
  }
  SECTION("storing again replaces the entry in place") {
    Entry changed = e;
    changed.shared_mem_bytes = 1024;
    REQUIRE(c.store(changed));
    CHECK(c.load(e.arch, e.key)->shared_mem_bytes == 1024);
    CHECK(files_under(dir.path()).size() == 1);
  }
  SECTION("the same key under another arch is a different entry") {
    CHECK_FALSE(c.load("sm_80", e.key).has_value());
  }
}

TEST_CASE("an entry filed under another key or arch is rejected and removed", "[cache]") {
  TempDir dir;
  DiskCache c(config_for(dir.path()));
  const Entry e = make_entry("original");
  REQUIRE(c.store(e));
  const std::string bytes = read_bytes(c.entry_path(e.arch, e.key));

  const std::string other_key = key_for("impostor");
  const std::string wrong_arch = "sm_80";
  for (auto [arch, key] : {std::pair{e.arch, other_key}, std::pair{wrong_arch, e.key}}) {
    const fs::path misplaced = c.entry_path(arch, key);
    fs::create_directories(misplaced.parent_path());
    write_bytes(misplaced, bytes);

    LogCapture log;
    CHECK_FALSE(c.load(arch, key).has_value());
    CHECK(log.count(misplaced.string()) == 1);
    CHECK(log.count("does not match the file name") + log.count("does not match the folder") == 1);
    CHECK_FALSE(fs::exists(misplaced));
  }
  CHECK(c.load(e.arch, e.key).has_value());  // the original is untouched
}

TEST_CASE("keys and arches that could leave the cache folder are refused", "[cache]") {
  TempDir dir;
  DiskCache c(config_for(dir.path()));
  Entry e = make_entry("bad names");
  for (std::string bad : {"../../etc/passwd", "a", "", "ab/cd", ".hidden"}) {
    CAPTURE(bad);
    try {
      c.load("sm_90a", bad);
      FAIL("no error for key " << bad);
    } catch (const Error& err) {
      CHECK(err.status() == Status::InvalidArgument);
    }
  }
  e.arch = "../sm_90a";
  CHECK_THROWS_AS(c.store(e), Error);
  CHECK(files_under(dir.path()).empty());
}

}  // namespace attnjit::test

// Cache modes (readwrite, readonly, off, require) and the memory-only
// fallback for a folder that cannot be written.
#include <unistd.h>

#include <map>

#include "attnjit/error.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

namespace {

// Everything a write could change: names, contents and modification times.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& p : files_under(dir))
    out[p.string()] = sha256_hex(read_bytes(p)) + "@" +
                      std::to_string(fs::last_write_time(p).time_since_epoch().count());
  return out;
}

fs::path shard_of(const DiskCache& c, const Entry& e) { return c.entry_path(e.arch, e.key).parent_path(); }

}  // namespace

TEST_CASE("mode readonly loads but never writes, bumps or removes", "[cache][modes]") {
  TempDir dir;
  const Entry good = make_entry("shipped"), bad = make_entry("shipped but damaged"), missing = make_entry("absent");
  {
    DiskCache rw(config_for(dir.path()));
    REQUIRE(rw.store(good));
    REQUIRE(rw.store(bad));
    flip_byte(rw.entry_path(bad.arch, bad.key), 200);
    const fs::path old_temp = shard_of(rw, good) / ("." + good.key + ".tmp.1.dead");
    write_bytes(old_temp, "abandoned");
    fs::last_write_time(old_temp, fs::file_time_type::clock::now() - std::chrono::hours(2));
  }
  const auto before = snapshot(dir.path());

  LogCapture log;
  DiskCache ro(config_for(dir.path(), CacheMode::ReadOnly, /*max_bytes=*/1));
  CHECK_FALSE(ro.writable());
  auto hit = ro.load(good.arch, good.key);
  REQUIRE(hit.has_value());
  check_same(*hit, good);

  CHECK_FALSE(ro.load(bad.arch, bad.key).has_value());
  CHECK(log.count("left in place") == 1);

  CHECK_FALSE(ro.store(missing));
  CountingProducer producer{missing};
  auto [got, source] = ro.get_or_produce(missing.arch, missing.key, "absent kernel", producer.fn());
  CHECK(producer.calls == 1);
  CHECK(source == DiskCache::Source::Produced);
  check_same(got, missing);

  CHECK(ro.clear() == 0);
  CHECK(ro.gc(0).evicted == 0);
  CHECK(ro.reap_temporaries(std::chrono::seconds(0)) == 0);
  const auto report = ro.verify(/*remove_corrupt=*/true);
  CHECK(report.ok == 1);
  CHECK(report.corrupt == 1);
  CHECK(report.removed == 0);
  CHECK(ro.list().size() == 2);

  CHECK(snapshot(dir.path()) == before);
}

TEST_CASE("mode off never touches the disk", "[cache][modes]") {
  TempDir dir;
  const Entry e = make_entry("off");
  {
    DiskCache rw(config_for(dir.path() / "populated"));
    REQUIRE(rw.store(e));
  }
  SECTION("an existing entry is not loaded") {
    DiskCache off(config_for(dir.path() / "populated", CacheMode::Off));
    CHECK_FALSE(off.load(e.arch, e.key).has_value());
    CHECK(off.list().empty());
    CHECK(off.stats().entries == 0);
    CHECK(off.clear() == 0);
    CHECK(off.verify(true).ok == 0);
    CHECK(fs::exists(off.entry_path(e.arch, e.key)));
  }
  SECTION("nothing is created, every get_or_produce produces") {
    const fs::path never = dir.path() / "never";
    DiskCache off(config_for(never, CacheMode::Off));
    CHECK_FALSE(off.writable());
    CHECK_FALSE(off.store(e));
    CountingProducer producer{e};
    for (int i = 0; i < 2; ++i)
      CHECK(off.get_or_produce(e.arch, e.key, "off kernel", producer.fn()).second == DiskCache::Source::Produced);
    CHECK(producer.calls == 2);
    CHECK(off.gc(std::nullopt).bytes_before == 0);
    CHECK(off.reap_temporaries(std::chrono::seconds(0)) == 0);
    CHECK_FALSE(fs::exists(never));
  }
}

TEST_CASE("mode require serves hits and refuses to compile a miss", "[cache][modes]") {
  TempDir dir;
  const Entry cached = make_entry("prewarmed"), absent = make_entry("not prewarmed");
  {
    DiskCache rw(config_for(dir.path()));
    REQUIRE(rw.store(cached));
  }
  DiskCache req(config_for(dir.path(), CacheMode::Require));
  CountingProducer producer{cached};
  auto [got, source] = req.get_or_produce(cached.arch, cached.key, "decode h128", producer.fn());
  CHECK(source == DiskCache::Source::Disk);
  check_same(got, cached);

  try {
    req.get_or_produce(absent.arch, absent.key, "prefill h256 causal", producer.fn());
    FAIL("a miss in mode require did not throw");
  } catch (const Error& err) {
    CHECK(err.status() == Status::CacheMiss);
    const std::string msg = err.what();
    CHECK_THAT(msg, Catch::Contains("prefill h256 causal"));
    CHECK_THAT(msg, Catch::Contains(absent.key));
    CHECK_THAT(msg, Catch::Contains(dir.path().string()));
    CHECK_THAT(msg, Catch::Contains("require") && Catch::Contains("forbids compiling"));
  }
  CHECK(producer.calls == 0);
  CHECK_FALSE(fs::exists(req.entry_path(absent.arch, absent.key)));
}

// Root ignores permission bits, so as root the folder is made unwritable in a
// way no privilege bypasses: a regular file where a folder must be created
// (mkdir fails with ENOTDIR). Other users get a plain chmod 0555.
TEST_CASE("an unwritable cache folder degrades to memory-only with one warning", "[cache][modes]") {
  TempDir dir;
  const fs::path root = dir.path() / "cache";
  const Entry readable = make_entry("stored while writable");
  Entry blocked = make_entry("blocked");
  for (int i = 0; blocked.key.substr(0, 2) == readable.key.substr(0, 2); ++i)
    blocked = make_entry("blocked " + std::to_string(i));
  {
    DiskCache rw(config_for(root));
    REQUIRE(rw.store(readable));
  }
  const fs::path arch_dir = root / readable.arch;
  if (::geteuid() == 0) {
    write_bytes(arch_dir / blocked.key.substr(0, 2), "a file where the shard folder belongs");
  } else {
    for (const auto& d : {root, arch_dir, arch_dir / readable.key.substr(0, 2)})
      fs::permissions(d, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                             fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  }

  LogCapture log;
  DiskCache c(config_for(root));
  CHECK_FALSE(c.store(blocked));
  CHECK_FALSE(c.writable());
  CHECK_FALSE(c.store(make_entry("also not stored")));
  CountingProducer producer{blocked};
  for (int i = 0; i < 2; ++i) {
    auto [got, source] = c.get_or_produce(blocked.arch, blocked.key, "blocked kernel", producer.fn());
    CHECK(source == DiskCache::Source::Produced);
    check_same(got, blocked);
  }
  CHECK(producer.calls == 2);  // nothing could be saved in between
  auto hit = c.load(readable.arch, readable.key);
  REQUIRE(hit.has_value());
  check_same(*hit, readable);

  CHECK(log.count("memory-only") == 1);
  CHECK(log.count("warn") == 1);
  CHECK(c.stats().writable == false);
  CHECK(c.list().size() == 1);
}

TEST_CASE("a cache folder that cannot be created degrades at construction, once per instance", "[cache][modes]") {
  TempDir dir;
  write_bytes(dir.path() / "a_file", "not a folder");
  const CacheConfig config = config_for(dir.path() / "a_file" / "cache");
  const Entry e = make_entry("nowhere");

  LogCapture log;
  DiskCache first(config);
  CHECK_FALSE(first.writable());
  CHECK_FALSE(first.load(e.arch, e.key).has_value());
  CHECK_FALSE(first.store(e));
  CountingProducer producer{e};
  CHECK(first.get_or_produce(e.arch, e.key, "kernel", producer.fn()).second == DiskCache::Source::Produced);
  CHECK(log.count("memory-only") == 1);
  CHECK_THAT(log.text(), Catch::Contains((dir.path() / "a_file").string()));

  DiskCache second(config);
  CHECK_FALSE(second.store(e));
  CHECK(log.count("memory-only") == 2);
}

}  // namespace attnjit::test

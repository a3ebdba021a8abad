// The size cap with LRU eviction, reaping of abandoned temporaries, and the
// maintenance operations behind `attnjit cache`.
#include "cache/entry_format.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

namespace {

using Clock = fs::file_time_type::clock;

fs::path stale_temp_beside(const DiskCache& c, const Entry& e, const std::string& tag, std::chrono::seconds age) {
  const fs::path p = c.entry_path(e.arch, e.key).parent_path() / ("." + e.key + ".tmp.424242." + tag);
  fs::create_directories(p.parent_path());
  write_bytes(p, "half a cubin");
  fs::last_write_time(p, Clock::now() - age);
  return p;
}

uint64_t serialized_size(const Entry& e) { return cache::entry_format::serialize(e).size(); }

}  // namespace

TEST_CASE("over the size cap, least-recently-used entries are evicted and hits count as use", "[cache][eviction]") {
  TempDir dir;
  std::vector<Entry> old;
  for (int i = 0; i < 4; ++i) old.push_back(make_entry("lru " + std::to_string(i)));
  {
    DiskCache roomy(config_for(dir.path()));
    for (size_t i = 0; i < old.size(); ++i) {
      REQUIRE(roomy.store(old[i]));
      // Oldest first: entry 0 was used 400 s ago, entry 3 100 s ago.
      fs::last_write_time(roomy.entry_path(old[i].arch, old[i].key),
                          Clock::now() - std::chrono::seconds(400 - 100 * i));
    }
  }
  const Entry fresh = make_entry("lru new");
  // Room for exactly three: the touched one, the newest old one, the new one.
  const uint64_t cap = serialized_size(old[0]) + serialized_size(old[3]) + serialized_size(fresh);
  DiskCache c(config_for(dir.path(), CacheMode::ReadWrite, cap));
  REQUIRE(c.load(old[0].arch, old[0].key).has_value());  // entry 0 becomes the most recently used
  REQUIRE(c.store(fresh));

  CHECK(c.load(old[0].arch, old[0].key).has_value());
  CHECK_FALSE(fs::exists(c.entry_path(old[1].arch, old[1].key)));
  CHECK_FALSE(fs::exists(c.entry_path(old[2].arch, old[2].key)));
  CHECK(c.load(old[3].arch, old[3].key).has_value());
  CHECK(c.load(fresh.arch, fresh.key).has_value());
  CHECK(c.stats().bytes <= cap);
  CHECK(c.stats().entries == 3);
}

TEST_CASE("the entry just stored survives even a cap smaller than itself", "[cache][eviction]") {
  TempDir dir;
  DiskCache c(config_for(dir.path(), CacheMode::ReadWrite, /*max_bytes=*/1));
  const Entry a = make_entry("first"), b = make_entry("second");
  REQUIRE(c.store(a));
  CHECK(c.load(a.arch, a.key).has_value());
  REQUIRE(c.store(b));
  CHECK_FALSE(c.load(a.arch, a.key).has_value());
  CHECK(c.load(b.arch, b.key).has_value());
}

TEST_CASE("gc evicts to the cap it is given and reports what it did", "[cache][eviction]") {
  TempDir dir;
  DiskCache c(config_for(dir.path()));
  std::vector<Entry> entries;
  uint64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    entries.push_back(make_entry("gc " + std::to_string(i), i == 2 ? "sm_80" : "sm_90a"));
    REQUIRE(c.store(entries.back()));
    fs::last_write_time(c.entry_path(entries[i].arch, entries[i].key), Clock::now() - std::chrono::seconds(300 - i));
    total += serialized_size(entries.back());
  }
  const fs::path stale = stale_temp_beside(c, entries[0], "gc", std::chrono::hours(1));

  const cache::GcReport r = c.gc(total - 1);
  CHECK(r.evicted == 1);
  CHECK(r.temporaries_reaped == 1);
  CHECK(r.bytes_before == total);
  CHECK(r.bytes_after == total - serialized_size(entries[0]));
  CHECK_FALSE(fs::exists(c.entry_path(entries[0].arch, entries[0].key)));
  CHECK_FALSE(fs::exists(stale));

  const cache::GcReport within = c.gc(std::nullopt);  // the configured 1 GiB
  CHECK(within.evicted == 0);
  CHECK(within.bytes_after == within.bytes_before);
}

TEST_CASE("stale temporaries from dead writers are reaped, fresh ones are left to their writers", "[cache][eviction]") {
  TempDir dir;
  const Entry e = make_entry("temporaries");
  SECTION("by reap_temporaries") {
    DiskCache c(config_for(dir.path()));
    const fs::path stale = stale_temp_beside(c, e, "stale", std::chrono::hours(1));
    const fs::path fresh = stale_temp_beside(c, e, "fresh", std::chrono::seconds(5));
    CHECK(c.reap_temporaries(DiskCache::kStaleTemporaryAge) == 1);
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(fresh));
    CHECK(c.reap_temporaries(std::chrono::seconds(0)) == 1);
    CHECK_FALSE(fs::exists(fresh));
  }
  SECTION("opportunistically, on a cache object's first store") {
    DiskCache c(config_for(dir.path()));
    const fs::path stale = stale_temp_beside(c, e, "stale", std::chrono::hours(1));
    REQUIRE(c.store(make_entry("another")));
    CHECK_FALSE(fs::exists(stale));
  }
}

TEST_CASE("list, verify, stats and clear describe and tidy the cache", "[cache][maintenance]") {
  TempDir dir;
  DiskCache c(config_for(dir.path(), CacheMode::ReadWrite, 12345));
  const Entry a = make_entry("maint a"), b = make_entry("maint b", "sm_80"), bad = make_entry("maint bad");
  for (const auto& e : {a, b, bad}) REQUIRE(c.store(e));
  const fs::path bad_path = c.entry_path(bad.arch, bad.key);
  flip_byte(bad_path, fs::file_size(bad_path) - 1);
  // A lock file left by an earlier get_or_produce.
  CountingProducer producer{make_entry("maint locked")};
  c.get_or_produce(producer.entry.arch, producer.entry.key, "locked", producer.fn());

  const auto listed = c.list();
  REQUIRE(listed.size() == 4);
  for (const auto& info : listed) {
    CHECK(info.bytes == fs::file_size(info.path));
    CHECK(info.metadata.contains("spec"));  // header intact even for the damaged payload
  }

  auto report = c.verify(/*remove_corrupt=*/false);
  CHECK(report.ok == 3);
  CHECK(report.corrupt == 1);
  CHECK(report.removed == 0);
  REQUIRE(report.problems.size() == 1);
  CHECK_THAT(report.problems[0], Catch::Contains(bad_path.string()) && Catch::Contains("SHA-256"));
  CHECK(fs::exists(bad_path));
  {
    LogCapture log;
    report = c.verify(/*remove_corrupt=*/true);
  }
  CHECK(report.removed == 1);
  CHECK_FALSE(fs::exists(bad_path));

  const cache::Stats s = c.stats();
  CHECK(s.entries == 3);
  CHECK(s.max_bytes == 12345);
  CHECK(s.dir == dir.path().string());
  CHECK(s.mode == CacheMode::ReadWrite);
  CHECK(s.writable);
  uint64_t bytes = 0;
  for (const auto& info : c.list()) bytes += info.bytes;
  CHECK(s.bytes == bytes);

  CHECK(c.clear() == 3);
  CHECK(c.list().empty());
  CHECK(files_under(dir.path()).empty());  // lock files too
}

}  // namespace attnjit::test

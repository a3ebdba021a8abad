// A damaged entry on disk: reported (path and problem), removed, treated as a
// miss, and recompiled by the next get_or_produce.
#include "cache/entry_format.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

namespace {

// Damages a freshly stored entry with `damage`, then checks the whole story.
template <typename Damage>
void check_damage_is_handled(const std::string& what, Damage damage) {
  TempDir dir;
  DiskCache c(config_for(dir.path()));
  const Entry e = make_entry("damaged " + what, "sm_90a", 2000);
  REQUIRE(c.store(e));
  const fs::path path = c.entry_path(e.arch, e.key);
  damage(path);

  LogCapture log;
  CHECK_FALSE(c.load(e.arch, e.key).has_value());
  CHECK(log.count(path.string()) == 1);
  CHECK(log.count("corrupt entry") == 1);
  CHECK(log.count("removed") == 1);
  CHECK_FALSE(fs::exists(path));

  CountingProducer producer{e};
  auto [got, source] = c.get_or_produce(e.arch, e.key, "damaged kernel", producer.fn());
  CHECK(producer.calls == 1);
  CHECK(source == DiskCache::Source::Produced);
  check_same(got, e);
  auto reloaded = c.load(e.arch, e.key);  // republished whole
  REQUIRE(reloaded.has_value());
  check_same(*reloaded, e);
}

}  // namespace

TEST_CASE("a truncated entry is reported, removed and recompiled", "[cache][corrupt]") {
  const size_t prefix = cache::entry_format::kPrefixBytes;
  for (size_t keep : {size_t{0}, size_t{7}, prefix - 1, prefix + 20, size_t{1500}}) {
    DYNAMIC_SECTION("cut to " << keep << " bytes") {
      check_damage_is_handled("cut " + std::to_string(keep), [&](const fs::path& p) {
        REQUIRE(fs::file_size(p) > keep);
        fs::resize_file(p, keep);
      });
    }
  }
  SECTION("one byte short") {
    check_damage_is_handled("one short", [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 1); });
  }
}

TEST_CASE("a flipped payload byte is reported, removed and recompiled", "[cache][corrupt]") {
  check_damage_is_handled("payload flip", [](const fs::path& p) { flip_byte(p, fs::file_size(p) - 100); });
}

TEST_CASE("a flipped header byte is reported, removed and recompiled", "[cache][corrupt]") {
  SECTION("in the fixed header (payload length)") {
    check_damage_is_handled("prefix flip", [](const fs::path& p) { flip_byte(p, 17); });
  }
  SECTION("in the JSON header's readable metadata") {
    check_damage_is_handled("json flip", [](const fs::path& p) {
      const std::string bytes = read_bytes(p);
      const size_t at = bytes.find("single_decode");
      REQUIRE(at != std::string::npos);
      flip_byte(p, at + 3);
    });
  }
}

}  // namespace attnjit::test

// The bytes of one entry file: round trip, verification, and a golden hash
// that fails on any accidental change to the format.
#include "cache/entry_format.hpp"

#include "support/cache_support.hpp"

namespace attnjit::test {

namespace fmt_ = cache::entry_format;

TEST_CASE("entry format round-trips every field", "[cache][format]") {
  const Entry e = make_entry("round trip", "sm_80", 3000);
  const std::string bytes = fmt_::serialize(e);
  Entry back;
  REQUIRE(fmt_::parse_entry(bytes, "sm_80", e.key, back) == "");
  check_same(back, e);

  SECTION("null metadata and no kernel names survive too") {
    Entry bare;
    bare.key = key_for("bare");
    bare.arch = "sm_90a";
    Entry got;
    REQUIRE(fmt_::parse_entry(fmt_::serialize(bare), "sm_90a", bare.key, got) == "");
    check_same(got, bare);
  }
}

TEST_CASE("entry format is pinned by a golden hash", "[cache][format]") {
  Entry e;
  e.key = "4f2a9c1b7e3d5a6f8091b2c3d4e5f6071829a3b4c5d6e7f8091a2b3c4d5e6f70";
  e.arch = "sm_90a";
  e.kernel_names = {"attnjit_single_decode", "attnjit_merge_states"};
  e.shared_mem_bytes = 73728;
  e.metadata = {{"spec", {{"op", "single_decode"}, {"head_dim", 128}, {"dtype", "bf16"}}},
                {"nvrtc", {{"version", "12.4"}, {"options", {"--gpu-architecture=sm_90a", "-std=c++17"}}}},
                {"compile_seconds", 1.5},
                {"created", "2024-05-01T12:00:00Z"}};
  for (int i = 0; i < 256; ++i) e.cubin.push_back(static_cast<char>(i));

  const std::string bytes = fmt_::serialize(e);
  CHECK(bytes.substr(0, 8) == "ATTNJITC");
  CHECK(bytes[8] == 1);  // format version 1, little-endian
  // If this fails, the on-disk format changed: bump entry_format::kVersion
  // (old caches then read as a clean miss) and update the constant.
  CHECK(sha256_hex(bytes) == "6ef7849e41a515b12587593aff94995c4871d623cf98f68dd41b63d4909474f4");
}

TEST_CASE("entry format rejects a key or arch other than the file name's", "[cache][format]") {
  const Entry e = make_entry("named");
  const std::string bytes = fmt_::serialize(e);
  Entry out;
  CHECK_THAT(fmt_::parse_entry(bytes, "sm_90a", key_for("other"), out), Catch::Contains("key"));
  CHECK_THAT(fmt_::parse_entry(bytes, "sm_80", e.key, out), Catch::Contains("arch"));
  CHECK(out.cubin.empty());
}

TEST_CASE("entry format detects a flip of any single byte", "[cache][format]") {
  const Entry e = make_entry("flips", "sm_90a", 64);
  const std::string good = fmt_::serialize(e);
  size_t missed = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      Entry out;
      if (fmt_::parse_entry(bad, e.arch, e.key, out).empty()) {
        ++missed;
        UNSCOPED_INFO("flip of byte " << i << " mask " << int(mask) << " went undetected");
      }
    }
  }
  CHECK(missed == 0);
}

TEST_CASE("entry format detects truncation at every length", "[cache][format]") {
  const Entry e = make_entry("cuts", "sm_90a", 64);
  const std::string good = fmt_::serialize(e);
  size_t missed = 0;
  for (size_t n = 0; n < good.size(); ++n) {
    Entry out;
    if (fmt_::parse_entry(good.substr(0, n), e.arch, e.key, out).empty()) ++missed;
  }
  CHECK(missed == 0);
  Entry out;
  CHECK_THAT(fmt_::parse_entry(good.substr(0, 10), e.arch, e.key, out), Catch::Contains("truncated"));
  CHECK_THAT(fmt_::parse_entry(good + "x", e.arch, e.key, out), Catch::Contains("damaged"));
}

TEST_CASE("entry format reads a header without the payload", "[cache][format]") {
  const Entry e = make_entry("head only", "sm_90a", 5000);
  const std::string bytes = fmt_::serialize(e);
  const uint64_t end = fmt_::header_end(bytes.substr(0, fmt_::kPrefixBytes));
  REQUIRE(end > fmt_::kPrefixBytes);
  REQUIRE(end < bytes.size());
  fmt_::Header h;
  REQUIRE(fmt_::parse_header(bytes.substr(0, end), bytes.size(), h) == "");
  CHECK(h.json["metadata"] == e.metadata);
  CHECK(h.payload_bytes == 5000);
}

}  // namespace attnjit::test

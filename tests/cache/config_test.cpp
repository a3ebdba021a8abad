// The cache's size cap as text: ATTNJIT_CACHE_MAX_BYTES and `cache gc
// --max-bytes` share one parser, which takes sizes and refuses, naming the
// variable, anything it would otherwise wrap or truncate (a sign, a value
// past 2^64 - 1, trailing garbage, zero).
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <string>

#include "attnjit/cache_config.hpp"
#include "attnjit/config.hpp"
#include "support/cli_process.hpp"
#include "support/error_capture.hpp"
#include "support/scoped_env.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

TEST_CASE("parse_byte_count takes whole bytes and K/M/G/T sizes exactly", "[cache][config]") {
  CHECK(parse_byte_count("1", "X") == 1);
  CHECK(parse_byte_count("4294967296", "X") == 4294967296ull);
  CHECK(parse_byte_count("18446744073709551615", "X") == UINT64_MAX);
  CHECK(parse_byte_count("512M", "X") == 512ull << 20);
  CHECK(parse_byte_count("4g", "X") == 4ull << 30);
  CHECK(parse_byte_count("4GiB", "X") == 4ull << 30);
  CHECK(parse_byte_count("2TB", "X") == 2ull << 40);
  CHECK(parse_byte_count("1.5GiB", "X") == 3ull << 29);
  CHECK(parse_byte_count("64KB", "X") == 64ull << 10);
  CHECK(parse_byte_count("0.3K", "X") == 307);  // rounded down to whole bytes
  CHECK(parse_byte_count("100B", "X") == 100);
  // 2^64 - 1 bytes is 16 EiB - 1: 16777215 TiB fits, 16777216 TiB does not.
  CHECK(parse_byte_count("16777215T", "X") == 16777215ull << 40);
}

TEST_CASE("parse_byte_count refuses, naming the argument, what it would wrap or drop", "[cache][config]") {
  const struct {
    const char* text;
    const char* why;
  } cases[] = {
      {"-5", "a sign is not allowed"},
      {"+5", "a sign is not allowed"},
      {"-0", "a sign is not allowed"},
      {"18446744073709551616", "more than 2^64 - 1 bytes"},
      {"99999999999999999999999", "more than 2^64 - 1 bytes"},
      {"16777216T", "more than 2^64 - 1 bytes"},
      {"12abc", "'abc' is not a suffix"},
      {"4 G", "' G' is not a suffix"},
      {"0x10", "'x10' is not a suffix"},
      {"1e9", "'e9' is not a suffix"},
      {" 5", "spaces are not allowed"},
      {"", "it is empty"},
      {"G", "it does not start with a digit"},
      {"nan", "it does not start with a digit"},
      {"0", "zero"},
      {"0.0001K", "zero"},
      {"1.5", "a fraction of a byte"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    const std::string msg = error_of([&] { parse_byte_count(c.text, "ATTNJIT_CACHE_MAX_BYTES"); },
                                     Status::InvalidArgument);
    CHECK_THAT(msg, Catch::StartsWith(std::string("ATTNJIT_CACHE_MAX_BYTES='") + c.text + "' is not a byte count"));
    CHECK_THAT(msg, Catch::Contains(c.why));
    CHECK_THAT(msg, Catch::Contains("allowed: a whole number of bytes from 1 to 18446744073709551615"));
  }
}

TEST_CASE("ATTNJIT_CACHE_MAX_BYTES: a negative or too large value is refused, a size is taken", "[cache][config]") {
  {
    ScopedEnv env("ATTNJIT_CACHE_MAX_BYTES", "-5");
    CHECK_THAT(error_of([] { Config::from_env(); }, Status::InvalidArgument),
               Catch::Contains("ATTNJIT_CACHE_MAX_BYTES='-5' is not a byte count (a sign is not allowed)"));
  }
  {
    ScopedEnv env("ATTNJIT_CACHE_MAX_BYTES", "18446744073709551616");
    CHECK_THAT(error_of([] { Config::from_env(); }, Status::InvalidArgument),
               Catch::Contains("more than 2^64 - 1 bytes"));
  }
  {
    ScopedEnv env("ATTNJIT_CACHE_MAX_BYTES", "2G");
    CHECK(Config::from_env().cache.max_bytes == 2ull << 30);
  }
}

TEST_CASE("CLI: a bad ATTNJIT_CACHE_MAX_BYTES or --max-bytes exits 2 naming it; nothing is evicted", "[cli][config]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  {
    DiskCache c(config_for(cache));
    REQUIRE(c.store(make_entry("keep me")));
  }
  for (const char* value : {"-5", "99999999999999999999999", "12abc"}) {
    const CliResult r = run_cli("cache gc", cache, std::string("ATTNJIT_CACHE_MAX_BYTES=") + value);
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(r.has(std::string("attnjit: error: ATTNJIT_CACHE_MAX_BYTES='") + value + "' is not a byte count"));
  }
  const CliResult flag = run_cli("cache gc --max-bytes=-5", cache);
  INFO(flag.output);
  CHECK(flag.status == 2);
  CHECK(flag.has("--max-bytes='-5' is not a byte count (a sign is not allowed)"));
  CHECK(DiskCache(config_for(cache)).stats().entries == 1);

  const CliResult stats = run_cli("cache stats", cache, "ATTNJIT_CACHE_MAX_BYTES=512M");
  INFO(stats.output);
  CHECK(stats.status == 0);
  CHECK(stats.has("cap:      536870912 (512.0 MiB)"));
}

}  // namespace attnjit::test

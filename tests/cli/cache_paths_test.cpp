// Which folder the CLI works on, and what it says when the path is wrong: an
// empty --cache-dir (or --arch, --model, ...) is refused by name rather than
// read as "not given", and a cache path that is a regular file is an error
// naming it, never an empty cache ("0 ok", exit 0).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/cli_process.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

TEST_CASE("CLI: an empty --cache-dir is refused by name, and the default cache is not touched", "[cli][paths]") {
  TempDir tmp;
  const fs::path home = tmp.path() / "home", env_cache = tmp.path() / "env-cache";
  const std::string env = "HOME=" + shell_quote(home.string()) + " XDG_CACHE_HOME=";
  const std::string out = shell_quote((tmp.path() / "out.tar").string());
  for (const std::string& args : std::vector<std::string>{"prewarm --model llama-3.1-8b --arch sm_80 --cache-dir ''", "cache ls --cache-dir ''",
                                 "cache verify --cache-dir ''", "cache gc --cache-dir ''", "cache clear --cache-dir ''",
                                 "cache stats --cache-dir ''", "cache pack --cache-dir '' " + out,
                                 "info --cache-dir ''", "explain --model llama-3.1-8b --cache-dir ''"}) {
    const CliResult r = run_cli(args, env_cache, env);
    INFO(args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(r.has("attnjit: error: --cache-dir: an empty value is not allowed; give a folder"));
  }
  CHECK_FALSE(fs::exists(env_cache));
  CHECK_FALSE(fs::exists(home));
}

TEST_CASE("CLI: other empty option values that meant a default are refused by name", "[cli][paths]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  const std::string out = shell_quote((tmp.path() / "out.tar").string());
  const struct {
    std::string args;
    const char* option;
  } cases[] = {
      {"prewarm --model llama-3.1-8b --arch ''", "--arch"},
      {"explain --model llama-3.1-8b --arch ''", "--arch"},
      {"prewarm --model ''", "--model"},
      {"prewarm --manifest ''", "--manifest"},
      {"cache ls --arch ''", "--arch"},
      {"cache gc --max-bytes ''", "--max-bytes"},
      {"cache pack --arch '' " + out, "--arch"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_cli(c.args, cache);
    INFO(c.args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(r.has(std::string("attnjit: error: ") + c.option + ": an empty value is not allowed"));
  }
  CHECK_FALSE(fs::exists(cache));
}

TEST_CASE("CLI: explain --arch '' is refused with the archs allowed, not explained for the default arch",
          "[cli][paths]") {
  TempDir tmp;
  for (const std::string& args : {std::string("explain --model llama-3.1-8b --arch ''"),
                                  std::string("explain --op batch_decode --model llama-3.1-8b --kv-len 4096 --arch ''")}) {
    const CliResult r = run_cli(args, tmp.path() / "cache");
    INFO(args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(r.has("attnjit: error: --arch: an empty value is not allowed; allowed: sm_80, "));
    CHECK(r.has("sm_90a"));
    CHECK(r.has("or leave --arch out for the first GPU's (else sm_90a)"));
    CHECK_FALSE(r.has("kernel"));  // nothing was explained
  }
  // A named arch still explains without a GPU.
  const CliResult named = run_cli("explain --model llama-3.1-8b --arch sm_80", tmp.path() / "cache");
  INFO(named.output);
  CHECK(named.status == 0);
  CHECK(named.has("sm_80"));
}

TEST_CASE("CLI: cache commands on a regular file say it is not a cache directory and exit non-zero",
          "[cli][paths]") {
  TempDir tmp;
  const fs::path file = tmp.path() / "notes.txt";
  write_bytes(file, "not a cache\n");
  const std::string out = shell_quote((tmp.path() / "out.tar").string());
  for (const std::string& args : std::vector<std::string>{"cache verify", "cache verify --remove", "cache ls", "cache stats", "cache gc",
                                 "cache clear", "cache pack " + out}) {
    const CliResult r = run_cli(args, file);
    INFO(args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(r.has("attnjit: error: " + file.string() + " is not a cache directory: it is a regular file"));
    CHECK_FALSE(r.has("0 ok"));
    CHECK_FALSE(r.has("0 entries"));
  }
  CHECK(read_bytes(file) == "not a cache\n");
  CHECK_FALSE(fs::exists(tmp.path() / "out.tar"));

  // A folder that does not exist is an empty cache, said as such.
  const CliResult missing = run_cli("cache verify", tmp.path() / "nope");
  INFO(missing.output);
  CHECK(missing.status == 0);
  CHECK(missing.has("0 ok, 0 corrupt"));
  CHECK(missing.has("note: the cache folder " + (tmp.path() / "nope").string() + " does not exist"));
}

}  // namespace attnjit::test

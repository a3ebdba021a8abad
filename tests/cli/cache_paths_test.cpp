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
  expect_cli(env_cache,
             each_expecting({"prewarm --model llama-3.1-8b --arch sm_80 --cache-dir ''", "cache ls --cache-dir ''",
                             "cache verify --cache-dir ''", "cache gc --cache-dir ''", "cache clear --cache-dir ''",
                             "cache stats --cache-dir ''", "cache pack --cache-dir '' " + out, "info --cache-dir ''",
                             "explain --model llama-3.1-8b --cache-dir ''"},
                            2, {"attnjit: error: --cache-dir: an empty value is not allowed; give a folder"}),
             env);
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
  std::vector<CliExpect> commands;
  for (const auto& c : cases)
    commands.push_back({c.args, 2, {std::string("attnjit: error: ") + c.option + ": an empty value is not allowed"}});
  expect_cli(cache, commands);
  CHECK_FALSE(fs::exists(cache));
}

TEST_CASE("CLI: explain --arch '' is refused with the archs allowed, not explained for the default arch",
          "[cli][paths]") {
  TempDir tmp;
  auto commands = each_expecting(
      {"explain --model llama-3.1-8b --arch ''", "explain --op batch_decode --model llama-3.1-8b --kv-len 4096 --arch ''"}, 2,
      {"attnjit: error: --arch: an empty value is not allowed; allowed: sm_80, ", "sm_90a",
       "or leave --arch out for the first GPU's (else sm_90a)"},
      {"kernel"} /* nothing was explained */);
  // A named arch still explains without a GPU.
  commands.push_back({"explain --model llama-3.1-8b --arch sm_80", 0, {"sm_80"}});
  expect_cli(tmp.path() / "cache", commands);
}

TEST_CASE("CLI: cache commands on a regular file say it is not a cache directory and exit non-zero",
          "[cli][paths]") {
  TempDir tmp;
  const fs::path file = tmp.path() / "notes.txt";
  write_bytes(file, "not a cache\n");
  const std::string out = shell_quote((tmp.path() / "out.tar").string());
  expect_cli(file, each_expecting({"cache verify", "cache verify --remove", "cache ls", "cache stats", "cache gc",
                                   "cache clear", "cache pack " + out},
                                  2, {"attnjit: error: " + file.string() + " is not a cache directory: it is a regular file"},
                                  {"0 ok", "0 entries"}));
  CHECK(read_bytes(file) == "not a cache\n");
  CHECK_FALSE(fs::exists(tmp.path() / "out.tar"));

  // A folder that does not exist is an empty cache, said as such.
  expect_cli(tmp.path() / "nope",
             {{"cache verify", 0, {"0 ok, 0 corrupt", "note: the cache folder " + (tmp.path() / "nope").string() + " does not exist"}}});
}

}  // namespace attnjit::test

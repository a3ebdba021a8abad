// prewarm's counts are true in every cache mode and folder: a mode that does
// not write stores nothing (even where an earlier run left the entries), and a
// complete cache this user cannot write is a success (nothing to store) while
// a missing kernel there is an error naming it, with nothing compiled. The
// cache commands that change the folder name the mode that kept them from
// it. Needs NVRTC (merge kernels for sm_80, well under a second each), never
// a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "support/cli_process.hpp"
#include "support/other_user.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {
namespace {

const char* kOneKernel =
    R"({"arch": "sm_80", "kernels": [{"family": "merge_states", "head_dim": 64, "o_dtype": "float16", "warps": 4}]})";
const char* kTwoKernels = R"({"arch": "sm_80", "kernels": [
    {"family": "merge_states", "head_dim": 64, "o_dtype": "float16", "warps": 4},
    {"family": "merge_states", "head_dim": 128, "o_dtype": "float16", "warps": 4}]})";

fs::path write_manifest(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  return p;
}

std::vector<fs::path> sorted_files(const fs::path& dir) {
  auto files = files_under(dir);
  std::sort(files.begin(), files.end());
  return files;
}

std::string prewarm(const fs::path& manifest) { return "prewarm --manifest " + shell_quote(manifest.string()); }

}  // namespace

TEST_CASE("CLI: prewarm in modes off and readonly counts nothing as stored, even over an earlier run's entries",
          "[cli][prewarm]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  const fs::path manifest = write_manifest(tmp.path(), "one.json", kOneKernel);
  const CliResult first = run_cli(prewarm(manifest), cache);
  INFO(first.output);
  REQUIRE(first.status == 0);
  REQUIRE(first.has("1 kernels: 1 compiled, 1 stored, 0 already cached"));
  const auto files = sorted_files(cache);
  expect_cli(cache, {
      // Mode off compiles again (it never reads the folder) and writes nothing:
      // the entry from the first run is not this run's store.
      {prewarm(manifest),
       0,
       {"1 kernels: 1 compiled, 0 stored (cache mode off), 0 already cached, 0 failed, 1 not stored",
        "cache mode off does not write"},
       {"1 stored"},
       "ATTNJIT_CACHE_MODE=off"},
      // Readonly loads the entry: already cached, nothing compiled or stored.
      {prewarm(manifest),
       0,
       {"1 kernels: 0 compiled, 0 stored (cache mode readonly), 1 already cached, 0 failed, 0 not stored"},
       {},
       "ATTNJIT_CACHE_MODE=readonly"},
  });
  CHECK(sorted_files(cache) == files);
}

TEST_CASE("CLI: prewarm as another user over a complete cache it cannot write succeeds; a missing kernel fails",
          "[cli][prewarm][faults]") {
  if (!can_run_cli_as_nobody()) return;
  TempDir tmp;
  open_to_others(tmp.path());
  const fs::path cache = tmp.path() / "cache";
  const fs::path one = write_manifest(tmp.path(), "one.json", kOneKernel);
  const fs::path two = write_manifest(tmp.path(), "two.json", kTwoKernels);
  // Filled by root: folders 0755, files 0644 (readable, not writable, for the other user).
  const CliResult fill = run_cli(prewarm(one), cache, "", "umask 022;");
  INFO(fill.output);
  REQUIRE(fill.status == 0);
  const auto files = sorted_files(cache);

  const std::vector<std::string> nothing_to_store = {
      "1 kernels: 0 compiled, 0 stored, 1 already cached, 0 failed, 0 not stored, 0 not cached",
      "is not writable, but every kernel is already cached there and verifies: nothing to store"};
  expect_cli(cache,
             {
                 {prewarm(one), 0, nothing_to_store, {"attnjit: error"}, "ATTNJIT_CACHE_MODE=require"},
                 {prewarm(one), 0, nothing_to_store, {"attnjit: error"}, "ATTNJIT_CACHE_MODE=readwrite"},
                 // One kernel more than the cache holds: it would have to be stored, and cannot.
                 {prewarm(two),
                  1,
                  {"2 kernels: 0 compiled, 0 stored, 1 already cached, 0 failed, 0 not stored, 1 not cached",
                   "attnjit: error: cannot store kernels in the cache folder " + cache.string(), "Permission denied",
                   "1 of 2 kernels are not cached there and were not compiled (they could not be stored): "
                   "merge_states_d128_f16_w4"},
                  {},
                  "ATTNJIT_CACHE_MODE=require"},
             },
             "", kCliAsNobody);
  CHECK(sorted_files(cache) == files);  // no lock file, no temporary: the other user touched nothing

  // --allow-memory-only still compiles what is missing, without storing it.
  expect_cli(cache, {{prewarm(two) + " --allow-memory-only", 0, {"2 kernels: 1 compiled, 0 stored, 1 already cached, 0 failed, 1 not stored"}}},
             "", kCliAsNobody);
}

TEST_CASE("CLI: cache clear, gc and verify --remove in modes off and readonly change nothing and name the mode",
          "[cli][prewarm]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  {
    DiskCache c(config_for(cache));
    REQUIRE(c.store(make_entry("kept")));
  }
  const auto files = sorted_files(cache);
  std::vector<CliExpect> commands;
  for (const std::string mode : {"off", "readonly"})
    for (const char* args : {"cache clear", "cache gc --max-bytes 1", "cache verify --remove"})
      commands.push_back({args, 0, {"note: cache mode is " + mode + " (ATTNJIT_CACHE_MODE)"}, {}, "ATTNJIT_CACHE_MODE=" + mode});
  expect_cli(cache, commands);
  CHECK(sorted_files(cache) == files);
}

}  // namespace attnjit::test

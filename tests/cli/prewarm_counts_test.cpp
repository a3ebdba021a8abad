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

  // Mode off compiles again (it never reads the folder) and writes nothing:
  // the entry from the first run is not this run's store.
  const CliResult off = run_cli(prewarm(manifest), cache, "ATTNJIT_CACHE_MODE=off");
  INFO(off.output);
  CHECK(off.status == 0);
  CHECK(off.has("1 kernels: 1 compiled, 0 stored (cache mode off), 0 already cached, 0 failed, 1 not stored"));
  CHECK(off.has("cache mode off does not write"));
  CHECK_FALSE(off.has("1 stored"));

  // Readonly loads the entry: already cached, nothing compiled or stored.
  const CliResult ro = run_cli(prewarm(manifest), cache, "ATTNJIT_CACHE_MODE=readonly");
  INFO(ro.output);
  CHECK(ro.status == 0);
  CHECK(ro.has("1 kernels: 0 compiled, 0 stored (cache mode readonly), 1 already cached, 0 failed, 0 not stored"));
  CHECK(sorted_files(cache) == files);
}

TEST_CASE("CLI: prewarm as another user over a complete cache it cannot write succeeds; a missing kernel fails",
          "[cli][prewarm][faults]") {
  if (!can_switch_user() || std::system("command -v setpriv >/dev/null 2>&1") != 0) {
    WARN("skipped: needs root and setpriv to act as a second user");
    return;
  }
  TempDir tmp;
  fs::permissions(tmp.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  const fs::path cache = tmp.path() / "cache";
  const fs::path one = write_manifest(tmp.path(), "one.json", kOneKernel);
  const fs::path two = write_manifest(tmp.path(), "two.json", kTwoKernels);
  // Filled by root: folders 0755, files 0644 (readable, not writable, for the other user).
  const CliResult fill = run_cli(prewarm(one), cache, "", "umask 022;");
  INFO(fill.output);
  REQUIRE(fill.status == 0);
  const auto files = sorted_files(cache);

  const std::string as_other = "setpriv --reuid=65534 --regid=65534 --clear-groups env";
  for (const char* mode : {"require", "readwrite"}) {
    const CliResult r = run_cli(prewarm(one), cache, std::string("ATTNJIT_CACHE_MODE=") + mode, as_other);
    INFO(mode << "\n" << r.output);
    CHECK(r.status == 0);
    CHECK(r.has("1 kernels: 0 compiled, 0 stored, 1 already cached, 0 failed, 0 not stored, 0 not cached"));
    CHECK(r.has("is not writable, but every kernel is already cached there and verifies: nothing to store"));
    CHECK_FALSE(r.has("attnjit: error"));
  }

  // One kernel more than the cache holds: it would have to be stored, and cannot.
  const CliResult missing = run_cli(prewarm(two), cache, "ATTNJIT_CACHE_MODE=require", as_other);
  INFO(missing.output);
  CHECK(missing.status == 1);
  CHECK(missing.has("2 kernels: 0 compiled, 0 stored, 1 already cached, 0 failed, 0 not stored, 1 not cached"));
  CHECK(missing.has("attnjit: error: cannot store kernels in the cache folder " + cache.string()));
  CHECK(missing.has("Permission denied"));
  CHECK(missing.has("1 of 2 kernels are not cached there and were not compiled (they could not be stored): "
                    "merge_states_d128_f16_w4"));
  CHECK(sorted_files(cache) == files);  // no lock file, no temporary: the other user touched nothing

  // --allow-memory-only still compiles what is missing, without storing it.
  const CliResult memory = run_cli(prewarm(two) + " --allow-memory-only", cache, "", as_other);
  INFO(memory.output);
  CHECK(memory.status == 0);
  CHECK(memory.has("2 kernels: 1 compiled, 0 stored, 1 already cached, 0 failed, 1 not stored"));
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
  for (const char* mode : {"off", "readonly"}) {
    for (const char* args : {"cache clear", "cache gc --max-bytes 1", "cache verify --remove"}) {
      const CliResult r = run_cli(args, cache, std::string("ATTNJIT_CACHE_MODE=") + mode);
      INFO(mode << " " << args << "\n" << r.output);
      CHECK(r.status == 0);
      CHECK(r.has(std::string("note: cache mode is ") + mode + " (ATTNJIT_CACHE_MODE)"));
    }
  }
  CHECK(sorted_files(cache) == files);
}

}  // namespace attnjit::test

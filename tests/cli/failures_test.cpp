// What a user sees when things go wrong, run as the CLI binary: one exit-code
// scheme (2 usage, 1 failed work, "attnjit: error:" prefix), input refused
// before anything is created, and prewarm never reporting as stored what the
// cache does not hold (unwritable folder, a file as the folder, `ulimit -f`,
// a full disk). Needs NVRTC for the cases that compile (one small sm_80
// kernel each), never a GPU.
#include <catch2/catch.hpp>
#include <sys/mount.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "support/cli_process.hpp"
#include "support/other_user.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {
namespace {

// The cheapest compile there is.
const char* kOneKernel = R"({"arch": "sm_80", "kernels": [{"family": "merge_states", "head_dim": 64, "o_dtype": "float16", "warps": 4}]})";

fs::path write_manifest(const fs::path& dir, const std::string& text, const std::string& name = "m.json") {
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p;
}

// A usage error: exit status 2 and the prefix, then what it names.
CliExpect usage_error(const std::string& args, std::vector<std::string> names = {}, std::string env = "") {
  names.insert(names.begin(), "attnjit: error: ");
  return {args, 2, std::move(names), {}, std::move(env)};
}

}  // namespace

TEST_CASE("CLI: usage errors exit 2 with the attnjit prefix, CLI11's own included", "[cli][exit-codes]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  expect_cli(cache, {
      usage_error("prewarm --bogus"),
      usage_error("prewarm --model llama-3.1-8b -j 0"),
      usage_error("cache"),
      usage_error("no-such-command"),
      usage_error("explain --head-dim notanumber"),
      {"--help", 0, {"Exit status: 0 success; 1"}},
      usage_error("cache stats", {"ATTNJIT_LOG_LEVEL='loud' is not a log level"}, "ATTNJIT_LOG_LEVEL=loud"),
  });
  CHECK_FALSE(fs::exists(cache));
}

TEST_CASE("CLI: an unknown arch is refused before any folder is created", "[cli][input]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  const fs::path manifest = write_manifest(tmp.path(), kOneKernel);
  for (const std::string arch : {"sm_12", "sm_99", "banana"}) {
    expect_cli(cache, {usage_error("prewarm --manifest " + shell_quote(manifest.string()) + " --arch " + arch,
                                   {"--arch='" + arch + "' is not a known arch; allowed: sm_80"})});
    CHECK_FALSE(fs::exists(cache));
  }
  const fs::path bad_arch = write_manifest(tmp.path(), R"({"arch": "sm_12", "kernels": []})", "arch.json");
  expect_cli(cache, {
      usage_error("explain --model llama-3.1-8b --arch sm_12", {"--arch='sm_12' is not a known arch"}),
      usage_error("prewarm --manifest " + shell_quote(bad_arch.string()), {"arch.json: /arch='sm_12' is not a known arch"}),
  });
  CHECK_FALSE(fs::exists(cache));
}

TEST_CASE("CLI: a manifest kernel spec the templates cannot take is refused before compiling", "[cli][input]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  const fs::path manifest = write_manifest(tmp.path(), R"({"arch": "sm_80", "kernels": [
    {"family": "merge_states", "head_dim": 64, "o_dtype": "float16", "warps": 4},
    {"family": "decode", "head_dim": 96, "q_dtype": "float16", "kv_dtype": "float16", "o_dtype": "float16",
     "pos_encoding": "NONE", "soft_cap": false, "mask": "none", "heads_per_cta": 1, "warps": 4, "unroll": 4}]})");
  expect_cli(cache, {usage_error("prewarm --manifest " + shell_quote(manifest.string()),
                                 {"m.json: /kernels/1: decode spec.head_dim=96 is not supported; allowed: 64, 128, 256"})});
  CHECK(files_under(tmp.path()).size() == 1);  // the manifest: no lock file, no entry
}

TEST_CASE("CLI: prewarm into a path that is a regular file fails before compiling, or reports not stored",
          "[cli][faults]") {
  TempDir tmp;
  const fs::path file = tmp.path() / "not-a-folder";
  write_bytes(file, "x");
  const fs::path manifest = write_manifest(tmp.path(), kOneKernel);
  expect_cli(file, {
      {"prewarm --manifest " + shell_quote(manifest.string()),
       1,
       {"attnjit: error: cannot store kernels in the cache folder", "exists but is not a folder", "--allow-memory-only"},
       {"1 compiled"} /* refused before compiling */},
      {"prewarm --allow-memory-only --manifest " + shell_quote(manifest.string()),
       0,
       {"1 kernels: 1 compiled, 0 stored, 0 already cached, 0 failed, 1 not stored",
        "not stored: merge_states_d64_f16_w4"}},
      // Not an empty cache: an error naming the path (test_cli_cache_paths has every cache command).
      {"cache stats", 2, {"is not a cache directory: it is a regular file"}},
  });
}

TEST_CASE("CLI: prewarm under `ulimit -f` reports not stored and exits 1, not killed by SIGXFSZ", "[cli][faults]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  const fs::path manifest = write_manifest(tmp.path(), kOneKernel);
  // Exit status 1, not 153 (128 + SIGXFSZ).
  expect_cli(cache,
             {{"prewarm --manifest " + shell_quote(manifest.string()),
               1,
               {"1 compiled, 0 stored, 0 already cached, 0 failed, 1 not stored", "File too large",
                "attnjit: error: 1 of 1 compiled kernels were not stored"}}},
             "", "ulimit -f 1;");
  for (const auto& f : files_under(cache)) CHECK(f.extension() == ".lock");  // no temporary, no partial entry
}

TEST_CASE("CLI: prewarm as a user who cannot write the folder fails before compiling", "[cli][faults]") {
  if (!can_run_cli_as_nobody()) return;
  TempDir tmp;
  open_to_others(tmp.path());
  const fs::path cache = tmp.path() / "cache";
  fs::create_directories(cache);  // root's, 0755
  const fs::path manifest = write_manifest(tmp.path(), kOneKernel);
  fs::permissions(manifest, fs::perms::all);
  expect_cli(cache,
             {
                 {"prewarm --manifest " + shell_quote(manifest.string()), 1,
                  {"cannot store kernels in the cache folder", "Permission denied"}},
                 {"cache stats", 0, {"writable: no: cannot create a file in"}},
                 {"info", 0, {"writable: no"}},
             },
             "", kCliAsNobody);
}

TEST_CASE("CLI: prewarm on a full disk reports not stored with the reason and exits 1", "[cli][faults]") {
  TempDir tmp;
  const fs::path mnt = tmp.path() / "small";
  fs::create_directories(mnt);
  // One page: the write probe's byte fits, no entry does.
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4k") != 0) {
    WARN("skipped: cannot mount a small tmpfs here (needs root): " << std::strerror(errno));
    return;
  }
  struct Unmount {
    fs::path p;
    ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const fs::path manifest = write_manifest(tmp.path(), kOneKernel);
  expect_cli(mnt / "cache", {{"prewarm --manifest " + shell_quote(manifest.string()),
                              1,
                              {"1 compiled, 0 stored", "1 not stored", "No space left on device"}}});
}

TEST_CASE("CLI: cache stats and verify show temporaries; stats reports writability by trying", "[cli][faults]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  const CliResult missing = run_cli("cache stats", cache);
  INFO(missing.output);
  CHECK(missing.has("writable: not yet created"));
  CHECK_FALSE(fs::exists(cache));

  const std::string key(64, 'a');
  fs::create_directories(cache / "sm_90a" / "aa");
  write_bytes(cache / "sm_90a" / "aa" / ("." + key + ".tmp.otherhost.4242.0123456789abcdef"), "partial");
  const CliResult stats = run_cli("cache stats", cache);
  INFO(stats.output);
  CHECK(stats.has("writable: yes"));
  CHECK(stats.has("temporaries: 1"));
  CHECK(stats.has("pid 4242 on host otherhost: unknown"));
  const CliResult verify = run_cli("cache verify", cache);
  INFO(verify.output);
  CHECK(verify.status == 0);
  CHECK(verify.has("0 ok, 0 corrupt, 1 temporary"));
  CHECK(verify.has("temporary: " + (cache / "sm_90a" / "aa").string()));
}

TEST_CASE("CLI: bench --jit-only leaves no temporary folder behind when it fails", "[cli][faults]") {
  TempDir tmp;
  const fs::path private_tmp = tmp.path() / "tmp";
  fs::create_directories(private_tmp);
  const CliResult r = run_cli("bench --jit-only --arch sm_80", tmp.path() / "cache",
                              "TMPDIR=" + shell_quote(private_tmp.string()) + " ATTNJIT_NVRTC_LIBRARY=/nonexistent/libnvrtc.so");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.has("attnjit: error: "));
  CHECK(fs::is_empty(private_tmp));
}

}  // namespace attnjit::test

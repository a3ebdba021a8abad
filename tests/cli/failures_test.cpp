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

void check_usage_error(const CliResult& r) {
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.has("attnjit: error: "));
}

}  // namespace

TEST_CASE("CLI: usage errors exit 2 with the attnjit prefix, CLI11's own included", "[cli][exit-codes]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  check_usage_error(run_cli("prewarm --bogus", cache));
  check_usage_error(run_cli("prewarm --model llama-3.1-8b -j 0", cache));
  check_usage_error(run_cli("cache", cache));
  check_usage_error(run_cli("no-such-command", cache));
  check_usage_error(run_cli("explain --head-dim notanumber", cache));
  const CliResult help = run_cli("--help", cache);
  CHECK(help.status == 0);
  CHECK(help.has("Exit status: 0 success; 1"));

  const CliResult level = run_cli("cache stats", cache, "ATTNJIT_LOG_LEVEL=loud");
  check_usage_error(level);
  CHECK(level.has("ATTNJIT_LOG_LEVEL='loud' is not a log level"));
  CHECK_FALSE(fs::exists(cache));
}

TEST_CASE("CLI: an unknown arch is refused before any folder is created", "[cli][input]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  const fs::path manifest = write_manifest(tmp.path(), kOneKernel);
  for (const char* arch : {"sm_12", "sm_99", "banana"}) {
    const CliResult r = run_cli("prewarm --manifest " + shell_quote(manifest.string()) + " --arch " + arch, cache);
    check_usage_error(r);
    CHECK(r.has(std::string("--arch='") + arch + "' is not a known arch; allowed: sm_80"));
    CHECK_FALSE(fs::exists(cache));
  }
  const CliResult explain = run_cli("explain --model llama-3.1-8b --arch sm_12", cache);
  check_usage_error(explain);
  CHECK(explain.has("--arch='sm_12' is not a known arch"));
  const fs::path bad_arch = write_manifest(tmp.path(), R"({"arch": "sm_12", "kernels": []})", "arch.json");
  const CliResult from_manifest = run_cli("prewarm --manifest " + shell_quote(bad_arch.string()), cache);
  check_usage_error(from_manifest);
  CHECK(from_manifest.has("arch.json: /arch='sm_12' is not a known arch"));
  CHECK_FALSE(fs::exists(cache));
}

TEST_CASE("CLI: a manifest kernel spec the templates cannot take is refused before compiling", "[cli][input]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  const fs::path manifest = write_manifest(tmp.path(), R"({"arch": "sm_80", "kernels": [
    {"family": "merge_states", "head_dim": 64, "o_dtype": "float16", "warps": 4},
    {"family": "decode", "head_dim": 96, "q_dtype": "float16", "kv_dtype": "float16", "o_dtype": "float16",
     "pos_encoding": "NONE", "soft_cap": false, "mask": "none", "heads_per_cta": 1, "warps": 4, "unroll": 4}]})");
  const CliResult r = run_cli("prewarm --manifest " + shell_quote(manifest.string()), cache);
  check_usage_error(r);
  CHECK(r.has("m.json: /kernels/1: decode spec.head_dim=96 is not supported; allowed: 64, 128, 256"));
  CHECK(files_under(tmp.path()).size() == 1);  // the manifest: no lock file, no entry
}

TEST_CASE("CLI: prewarm into a path that is a regular file fails before compiling, or reports not stored",
          "[cli][faults]") {
  TempDir tmp;
  const fs::path file = tmp.path() / "not-a-folder";
  write_bytes(file, "x");
  const fs::path manifest = write_manifest(tmp.path(), kOneKernel);
  const CliResult r = run_cli("prewarm --manifest " + shell_quote(manifest.string()), file);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.has("attnjit: error: cannot store kernels in the cache folder"));
  CHECK(r.has("exists but is not a folder"));
  CHECK(r.has("--allow-memory-only"));
  CHECK_FALSE(r.has("1 compiled"));  // refused before compiling

  const CliResult mem = run_cli("prewarm --allow-memory-only --manifest " + shell_quote(manifest.string()), file);
  INFO(mem.output);
  CHECK(mem.status == 0);
  CHECK(mem.has("1 kernels: 1 compiled, 0 stored, 0 already cached, 0 failed, 1 not stored"));
  CHECK(mem.has("not stored: merge_states_d64_f16_w4"));

  // Not an empty cache: an error naming the path (test_cli_cache_paths has every cache command).
  const CliResult stats = run_cli("cache stats", file);
  INFO(stats.output);
  CHECK(stats.status == 2);
  CHECK(stats.has("is not a cache directory: it is a regular file"));
}

TEST_CASE("CLI: prewarm under `ulimit -f` reports not stored and exits 1, not killed by SIGXFSZ", "[cli][faults]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache";
  const fs::path manifest = write_manifest(tmp.path(), kOneKernel);
  const CliResult r = run_cli("prewarm --manifest " + shell_quote(manifest.string()), cache, "", "ulimit -f 1;");
  INFO(r.output);
  CHECK(r.status == 1);  // not 153 (128 + SIGXFSZ)
  CHECK(r.has("1 compiled, 0 stored, 0 already cached, 0 failed, 1 not stored"));
  CHECK(r.has("File too large"));
  CHECK(r.has("attnjit: error: 1 of 1 compiled kernels were not stored"));
  for (const auto& f : files_under(cache)) CHECK(f.extension() == ".lock");  // no temporary, no partial entry
}

TEST_CASE("CLI: prewarm as a user who cannot write the folder fails before compiling", "[cli][faults]") {
  if (!can_switch_user() || std::system("command -v setpriv >/dev/null 2>&1") != 0) {
    WARN("skipped: needs root and setpriv to act as a second user");
    return;
  }
  TempDir tmp;
  fs::permissions(tmp.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  const fs::path cache = tmp.path() / "cache";
  fs::create_directories(cache);  // root's, 0755
  const fs::path manifest = write_manifest(tmp.path(), kOneKernel);
  fs::permissions(manifest, fs::perms::all);
  const std::string as_other = "setpriv --reuid=65534 --regid=65534 --clear-groups env";
  const CliResult r = run_cli("prewarm --manifest " + shell_quote(manifest.string()), cache, "", as_other);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.has("cannot store kernels in the cache folder"));
  CHECK(r.has("Permission denied"));
  const CliResult stats = run_cli("cache stats", cache, "", as_other);
  INFO(stats.output);
  CHECK(stats.has("writable: no: cannot create a file in"));
  const CliResult info = run_cli("info", cache, "", as_other);
  INFO(info.output);
  CHECK(info.has("writable: no"));
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
  const CliResult r = run_cli("prewarm --manifest " + shell_quote(manifest.string()), mnt / "cache");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.has("1 compiled, 0 stored"));
  CHECK(r.has("1 not stored"));
  CHECK(r.has("No space left on device"));
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

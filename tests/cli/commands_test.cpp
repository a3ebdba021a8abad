// The `attnjit` command-line tool, run as a separate process against a fresh
// cache folder: prewarm from a manifest, cache ls/verify (and corruption),
// explain, info, and its error paths. Needs NVRTC (two tiny sm_80 compiles),
// never a GPU. The binary must be built first (target attnjit_cli).
#include <catch2/catch.hpp>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

namespace fs = std::filesystem;

namespace {

const std::string kBinary = ATTNJIT_TEST_BINARY_DIR "/attnjit";

struct Result {
  int status = -1;     // exit status, or -1 if it did not exit normally
  std::string output;  // stdout and stderr together
};

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "attnjit-cli-test-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `attnjit <args>` with the cache in `cache_dir` (read-write, whatever the caller's environment says).
Result attnjit(const std::string& args, const fs::path& cache_dir) {
  if (!fs::exists(kBinary)) FAIL("the attnjit binary is missing at " << kBinary << ": build the attnjit_cli target");
  const std::string cmd = "ATTNJIT_CACHE_DIR=" + quote(cache_dir.string()) +
                          " ATTNJIT_CACHE_MODE=readwrite ATTNJIT_LOG_LEVEL=warn " + quote(kBinary) + " " + args +
                          " 2>&1";
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::vector<fs::path> cubins_under(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".cubin") out.push_back(e.path());
  return out;
}

// Two small kernels (head_dim 64, fp16): the cheapest compiles there are.
const char* kManifest = R"({
  "arch": "sm_80",
  "kernels": [
    {"family": "merge_states", "head_dim": 64, "o_dtype": "float16", "warps": 4},
    {"family": "decode", "head_dim": 64, "q_dtype": "float16", "kv_dtype": "float16", "o_dtype": "float16",
     "pos_encoding": "NONE", "soft_cap": false, "heads_per_cta": 1, "warps": 4, "unroll": 4}
  ]
})";

}  // namespace

TEST_CASE("attnjit prewarm --manifest fills the cache; cache ls/stats/verify see it; corruption is caught",
          "[cli]") {
  TempDir tmp;
  const fs::path cache = tmp.path / "cache";
  const fs::path manifest = tmp.path / "kernels.json";
  std::ofstream(manifest) << kManifest;

  const Result first = attnjit("prewarm --manifest " + quote(manifest.string()) + " -j 2", cache);
  INFO(first.output);
  REQUIRE(first.status == 0);
  CHECK(contains(first.output, "for sm_80: 2 kernels: 2 compiled, 2 stored, 0 already cached, 0 failed, 0 not stored"));
  CHECK(contains(first.output, "cache: " + cache.string()));

  const Result second = attnjit("prewarm --manifest " + quote(manifest.string()), cache);
  INFO(second.output);
  REQUIRE(second.status == 0);
  CHECK(contains(second.output, "2 kernels: 0 compiled, 0 stored, 2 already cached, 0 failed, 0 not stored"));

  const Result ls = attnjit("cache ls", cache);
  INFO(ls.output);
  CHECK(ls.status == 0);
  CHECK(contains(ls.output, "merge_states_d64_f16_w4"));
  CHECK(contains(ls.output, "decode_d64_g1_f16_f16_f16_none_w4_u4"));
  CHECK(contains(ls.output, "sm_80"));
  CHECK(contains(ls.output, "2 entries"));

  const Result stats = attnjit("cache stats", cache);
  INFO(stats.output);
  CHECK(stats.status == 0);
  CHECK(contains(stats.output, "entries:  2"));
  CHECK(contains(stats.output, "writable: yes"));

  const Result ok = attnjit("cache verify", cache);
  INFO(ok.output);
  CHECK(ok.status == 0);
  CHECK(contains(ok.output, "2 ok, 0 corrupt, 0 temporaries"));

  // Flip one payload byte of one entry.
  const auto files = cubins_under(cache);
  REQUIRE(files.size() == 2);
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-64, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-64, std::ios::end);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  const Result bad = attnjit("cache verify", cache);
  INFO(bad.output);
  CHECK(bad.status == 1);
  CHECK(contains(bad.output, "1 ok, 1 corrupt"));
  CHECK(contains(bad.output, files[0].filename().string()));

  const Result removed = attnjit("cache verify --remove", cache);
  INFO(removed.output);
  CHECK(removed.status == 1);  // corruption was found, even though it is now removed
  CHECK(contains(removed.output, "1 removed"));
  CHECK_FALSE(fs::exists(files[0]));

  const Result after = attnjit("cache verify", cache);
  CHECK(after.status == 0);

  const Result cleared = attnjit("cache clear", cache);
  INFO(cleared.output);
  CHECK(cleared.status == 0);
  CHECK(contains(cleared.output, "removed 1 entry"));
  CHECK(cubins_under(cache).empty());
}

TEST_CASE("attnjit explain prints each kernel's spec, 64-hex-digit key and cache path without a GPU", "[cli]") {
  TempDir tmp;
  const Result r = attnjit(
      "explain --num-qo-heads 32 --num-kv-heads 8 --head-dim 128 --q-dtype bfloat16 --kv-dtype float8_e4m3fn "
      "--arch sm_90a --source",
      tmp.path);
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, std::regex("key: +([0-9a-f]{64})\n")));
  CHECK(contains(r.output, (tmp.path / "sm_90a").string() + "/" + m[1].str().substr(0, 2) + "/" + m[1].str() + ".cubin"));
  CHECK(contains(r.output, "decode_d128_g4_bf16_e4m3_bf16_none_w4_tc"));
  CHECK(contains(r.output, "\"family\":\"decode\""));
  CHECK(contains(r.output, "cached: no"));
  CHECK(contains(r.output, "extern \"C\" __global__"));  // --source
}

TEST_CASE("attnjit info and --version run on any machine", "[cli]") {
  TempDir tmp;
  const Result info = attnjit("info", tmp.path);
  INFO(info.output);
  CHECK(info.status == 0);
  CHECK(contains(info.output, "nvrtc:"));
  CHECK(contains(info.output, "driver:"));
  CHECK(contains(info.output, tmp.path.string()));

  const Result version = attnjit("--version", tmp.path);
  CHECK(version.status == 0);
  CHECK(contains(version.output, "attnjit 0."));
}

TEST_CASE("attnjit reports bad input as 'attnjit: error:' with exit status 2", "[cli]") {
  TempDir tmp;
  const Result model = attnjit("prewarm --model no-such-model", tmp.path);
  INFO(model.output);
  CHECK(model.status == 2);
  CHECK(contains(model.output, "attnjit: error: --model='no-such-model' is not a known model"));
  CHECK(contains(model.output, "llama-3.1-8b"));
  CHECK(contains(model.output, "gemma-2-9b"));

  const fs::path manifest = tmp.path / "bad.json";
  std::ofstream(manifest) << R"({"problems": [{"num_qo_heads": 32, "num_kv_heads": 8, "head_dim": 128, "kvdtype": "e4m3"}]})";
  const Result bad = attnjit("prewarm --manifest " + quote(manifest.string()), tmp.path);
  INFO(bad.output);
  CHECK(bad.status == 2);
  CHECK(contains(bad.output, "bad.json: /problems/0: problem.kvdtype is not a single_decode field; allowed:"));
  CHECK_FALSE(fs::exists(tmp.path / "sm_90a"));  // nothing compiled
}

// The `attnjit` command-line tool, run as a separate process against a fresh
// cache folder: prewarm from a manifest, cache ls/verify (and corruption),
// explain, info, and its error paths. Needs NVRTC (two tiny sm_80 compiles),
// never a GPU. The binary must be built first (target attnjit_cli).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "support/cache_support.hpp"
#include "support/cli_process.hpp"

namespace attnjit::test {
namespace {

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
  const fs::path cache = tmp.path() / "cache";
  const fs::path manifest = tmp.path() / "kernels.json";
  std::ofstream(manifest) << kManifest;
  expect_cli(cache, {
      {"prewarm --manifest " + shell_quote(manifest.string()) + " -j 2", 0,
       {"for sm_80: 2 kernels: 2 compiled, 2 stored, 0 already cached, 0 failed, 0 not stored",
        "cache: " + cache.string()}},
      {"prewarm --manifest " + shell_quote(manifest.string()), 0,
       {"2 kernels: 0 compiled, 0 stored, 2 already cached, 0 failed, 0 not stored"}},
      {"cache ls", 0, {"merge_states_d64_f16_w4", "decode_d64_g1_f16_f16_f16_none_w4_u4", "sm_80", "2 entries"}},
      {"cache stats", 0, {"entries:  2", "writable: yes"}},
      {"cache verify", 0, {"2 ok, 0 corrupt, 0 temporaries"}},
  });

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
  expect_cli(cache, {
      {"cache verify", 1, {"1 ok, 1 corrupt", files[0].filename().string()}},
      // Corruption was found, even though it is now removed: still 1.
      {"cache verify --remove", 1, {"1 removed"}},
  });
  CHECK_FALSE(fs::exists(files[0]));
  expect_cli(cache, {{"cache verify", 0, {}}, {"cache clear", 0, {"removed 1 entry"}}});
  CHECK(cubins_under(cache).empty());
}

TEST_CASE("attnjit explain prints each kernel's spec, 64-hex-digit key and cache path without a GPU", "[cli]") {
  TempDir tmp;
  // --source: the kernel's generated source too.
  const CliResult r = expect_cli(tmp.path(), {{"explain --num-qo-heads 32 --num-kv-heads 8 --head-dim 128 "
                                               "--q-dtype bfloat16 --kv-dtype float8_e4m3fn --arch sm_90a --source",
                                               0,
                                               {"decode_d128_g4_bf16_e4m3_bf16_none_w4_tc", "\"family\":\"decode\"",
                                                "cached: no", "extern \"C\" __global__"}}})
                          .front();
  INFO(r.output);
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, std::regex("key: +([0-9a-f]{64})\n")));
  CHECK(r.has((tmp.path() / "sm_90a").string() + "/" + m[1].str().substr(0, 2) + "/" + m[1].str() + ".cubin"));
}

TEST_CASE("attnjit info and --version run on any machine", "[cli]") {
  TempDir tmp;
  expect_cli(tmp.path(), {{"info", 0, {"nvrtc:", "driver:", tmp.path().string()}}, {"--version", 0, {"attnjit 0."}}});
}

TEST_CASE("attnjit reports bad input as 'attnjit: error:' with exit status 2", "[cli]") {
  TempDir tmp;
  const fs::path manifest = tmp.path() / "bad.json";
  std::ofstream(manifest) << R"({"problems": [{"num_qo_heads": 32, "num_kv_heads": 8, "head_dim": 128, "kvdtype": "e4m3"}]})";
  expect_cli(tmp.path(), {
      {"prewarm --model no-such-model", 2,
       {"attnjit: error: --model='no-such-model' is not a known model", "llama-3.1-8b", "gemma-2-9b"}},
      {"prewarm --manifest " + shell_quote(manifest.string()), 2,
       {"bad.json: /problems/0: problem.kvdtype is not a single_decode field; allowed:"}},
  });
  CHECK_FALSE(fs::exists(tmp.path() / "sm_90a"));  // nothing compiled
}

}  // namespace attnjit::test

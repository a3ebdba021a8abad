// The CLI knows batch_prefill and merge_state through the registry: explain
// lists and plans them without a GPU, and prewarm compiles a manifest's
// problems of both (two small sm_80 compiles, about 2 s here).
#include <catch2/catch.hpp>
#include <fstream>

#include "support/cli_process.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

TEST_CASE("attnjit explain --op batch_prefill lists and plans its kernels without a GPU", "[cli][batch_prefill]") {
  TempDir tmp;
  expect_cli(tmp.path(), {
      {"explain --list-ops", 0, {"batch_prefill ", "merge_state "}},
      // Every kernel the problem may use: fa2's tiles, the Hopper kernel "auto" plans (fa3_ws, persistent without a
      // causal mask), and the merge.
      {"explain --op batch_prefill --model llama-3.1-8b --arch sm_90a", 0,
       {"[1/4] prefill_d128_m1_s2_bf16_bf16_bf16_none_ragged", "[3/4] prefill_fa3ws_d128_s2_persistent_bf16_bf16_bf16_none_ragged",
        "[4/4] merge_states_d128_bf16_w4\n", "cached: no"}},
      // --kv-len: the plan of one fresh prompt of that length.
      {"explain --op batch_prefill --model llama-3.1-8b --kv-len 4096 --arch sm_80", 0,
       {"plan:    for 132 SMs", "batch_size: 1", "prefill prefill_d128_m2_s2_bf16_bf16_bf16_none_ragged: grid"}},
      // Lengths as lists, paged, short appends onto long caches: a KV split and its merge.
      {"explain --arch sm_90a --problem '{\"op\": \"batch_prefill\", \"kv_source\": \"paged\", \"num_qo_heads\": 32, "
       "\"num_kv_heads\": 8, \"head_dim\": 128, \"causal\": true, \"qo_lens\": [1, 2], \"kv_lens\": [32768, 20000]}'",
       0, {"batch_size: 2", "causal_paged: grid", "merge merge_states_d128_bf16_w4: grid"}},
      {"explain --problem '{\"op\": \"batch_prefill\", \"num_qo_heads\": 32, \"num_kv_heads\": 8, \"head_dim\": 128, "
       "\"kv_source\": \"ragged\", \"page_size\": 16}'",
       2, {"page_size=16 is not allowed with kv_source='ragged'"}},
  });
}

TEST_CASE("attnjit prewarm compiles a manifest's batch_prefill and merge_state problems", "[cli][batch_prefill]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache", manifest = tmp.path() / "serving.json";
  // CUDA-graph mode with fa2 at head_dim 256: one kernel (a fixed tile, no split); one merge.
  std::ofstream(manifest) << R"({"arch": "sm_80", "problems": [
    {"op": "batch_prefill", "kv_source": "paged", "num_qo_heads": 8, "num_kv_heads": 2, "head_dim": 256,
     "q_dtype": "float16", "causal": true, "backend": "fa2", "use_cuda_graph": true, "max_batch_size": 8},
    {"op": "merge_state", "head_dim": 64, "dtype": "float16"}]})";
  expect_cli(cache, {
      {"prewarm --manifest " + shell_quote(manifest.string()) + " -j 2", 0, {"for sm_80: 2 kernels: 2 compiled, 2 stored"}},
      {"cache ls", 0, {"prefill_d256_m1_s1_f16_f16_f16_none_causal_paged", "merge_states_d64_f16_w4_in_f16"}},
  });
}

}  // namespace attnjit::test

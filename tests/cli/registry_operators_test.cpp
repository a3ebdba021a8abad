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
  const CliResult list = run_cli("explain --list-ops", tmp.path());
  INFO(list.output);
  CHECK(list.status == 0);
  CHECK(list.has("batch_prefill "));
  CHECK(list.has("merge_state "));

  // Every kernel the problem may use: fa2's tiles, the Hopper kernel "auto" plans (fa3_ws), and the merge.
  const CliResult all = run_cli("explain --op batch_prefill --model llama-3.1-8b --arch sm_90a", tmp.path());
  INFO(all.output);
  REQUIRE(all.status == 0);
  CHECK(all.has("[1/4] prefill_d128_m1_s2_bf16_bf16_bf16_none_ragged"));
  CHECK(all.has("[3/4] prefill_fa3ws_d128_s2_bf16_bf16_bf16_none_ragged"));
  CHECK(all.has("[4/4] merge_states_d128_bf16_w4\n"));
  CHECK(all.has("cached: no"));

  // --kv-len: the plan of one fresh prompt of that length.
  const CliResult one =
      run_cli("explain --op batch_prefill --model llama-3.1-8b --kv-len 4096 --arch sm_80", tmp.path());
  INFO(one.output);
  REQUIRE(one.status == 0);
  CHECK(one.has("plan:    for 132 SMs"));
  CHECK(one.has("batch_size: 1"));
  CHECK(one.has("prefill prefill_d128_m2_s2_bf16_bf16_bf16_none_ragged: grid"));

  // Lengths as lists, paged, short appends onto long caches: a KV split and its merge.
  const CliResult paged = run_cli(
      "explain --arch sm_90a --problem '{\"op\": \"batch_prefill\", \"kv_source\": \"paged\", \"num_qo_heads\": 32, "
      "\"num_kv_heads\": 8, \"head_dim\": 128, \"causal\": true, \"qo_lens\": [1, 2], \"kv_lens\": [32768, 20000]}'",
      tmp.path());
  INFO(paged.output);
  REQUIRE(paged.status == 0);
  CHECK(paged.has("batch_size: 2"));
  CHECK(paged.has("causal_paged: grid"));
  CHECK(paged.has("merge merge_states_d128_bf16_w4: grid"));

  const CliResult bad = run_cli(
      "explain --problem '{\"op\": \"batch_prefill\", \"num_qo_heads\": 32, \"num_kv_heads\": 8, \"head_dim\": 128, "
      "\"kv_source\": \"ragged\", \"page_size\": 16}'",
      tmp.path());
  INFO(bad.output);
  CHECK(bad.status == 2);
  CHECK(bad.has("page_size=16 is not allowed with kv_source='ragged'"));
}

TEST_CASE("attnjit prewarm compiles a manifest's batch_prefill and merge_state problems", "[cli][batch_prefill]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache", manifest = tmp.path() / "serving.json";
  // CUDA-graph mode with fa2 at head_dim 256: one kernel (a fixed tile, no split); one merge.
  std::ofstream(manifest) << R"({"arch": "sm_80", "problems": [
    {"op": "batch_prefill", "kv_source": "paged", "num_qo_heads": 8, "num_kv_heads": 2, "head_dim": 256,
     "q_dtype": "float16", "causal": true, "backend": "fa2", "use_cuda_graph": true, "max_batch_size": 8},
    {"op": "merge_state", "head_dim": 64, "dtype": "float16"}]})";
  const CliResult r = run_cli("prewarm --manifest " + shell_quote(manifest.string()) + " -j 2", cache);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.has("for sm_80: 2 kernels: 2 compiled, 2 stored"));
  const CliResult ls = run_cli("cache ls", cache);
  INFO(ls.output);
  CHECK(ls.has("prefill_d256_m1_s1_f16_f16_f16_none_causal_paged"));
  CHECK(ls.has("merge_states_d64_f16_w4_in_f16"));
}

}  // namespace attnjit::test

// attnjit prewarm / explain --variant FILE: a user variant (the spec's "user"
// JSON) put into the attention problems. explain shows the kernels with it
// (no GPU); prewarm compiles a manifest's decode problem with it (one small
// sm_80 compile) next to a merge_state problem, which takes none; a bad file
// or declaration is refused naming it.
#include <catch2/catch.hpp>
#include <fstream>

#include "support/cli_process.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {

namespace {

const char* kWindowVariant =
    R"({"mask_mod": "return p.doc_at(q) == p.doc_at(kv) && kv <= q;", "params": [{"name": "doc", "type": "i32", "rank": 1}]})";

}  // namespace

TEST_CASE("attnjit explain --variant FILE shows the kernels compiled with it; bad files are named",
          "[cli][user_variant]") {
  TempDir tmp;
  const fs::path file = tmp.path() / "docs.json";
  std::ofstream(file) << kWindowVariant;
  // A mask_mod replaces causal (the model problems' causal=true is dropped for it).
  const CliResult r = run_cli("explain --op single_prefill --model llama-3.1-8b --arch sm_90a --variant " +
                                  shell_quote(file.string()),
                              tmp.path());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.has("_user"));
  CHECK(r.has("\"variant\""));
  CHECK(r.has("prefill_fa3ws_"));  // auto's Hopper skeleton at head_dim 128 takes a mask_mod
  CHECK_FALSE(r.has("block_mask"));

  // Block-sparse: the classification kernel first, its workspace region, one slot when heads do not vary.
  const fs::path sparse = tmp.path() / "sparse.json";
  std::ofstream(sparse) << R"({"mask_mod": "return p.doc_at(q) == p.doc_at(kv) && kv <= q;", )"
                           R"("params": [{"name": "doc", "type": "i32", "rank": 1}], "block_sparse": true, )"
                           R"("heads_vary": false})";
  const CliResult s = run_cli("explain --op single_prefill --arch sm_90a --problem '{\"num_qo_heads\": 32, "
                              "\"num_kv_heads\": 8, \"head_dim\": 128, \"qo_len\": 1000, \"kv_len\": 1000}' --variant " +
                                  shell_quote(sparse.string()),
                              tmp.path());
  INFO(s.output);
  REQUIRE(s.status == 0);
  CHECK(s.has("\"block_sparse\":true"));
  CHECK(s.has("\"name\":\"block_mask\""));  // the workspace region
  CHECK(s.has("block_mask block_mask_user"));  // the plan's first kernel, before the prefill
  CHECK(s.has("grid [32,1,1]"));  // 1000 tokens x 4 heads in 128-row tiles, one slot (heads_vary false)
  CHECK(s.has("prefill_fa3ws_"));

  const fs::path bad = tmp.path() / "bad.json";
  std::ofstream(bad) << R"({"score_mod": "return s;", "params": [{"name": "x", "type": "f64"}]})";
  const CliResult b = run_cli("explain --op single_decode --model llama-3.1-8b --variant " + shell_quote(bad.string()),
                              tmp.path());
  INFO(b.output);
  CHECK(b.status != 0);
  CHECK(b.has("problem.variant.params[0].type"));

  const fs::path not_json = tmp.path() / "not.json";
  std::ofstream(not_json) << "{";
  const CliResult n = run_cli("explain --op single_decode --model llama-3.1-8b --variant " +
                                  shell_quote(not_json.string()),
                              tmp.path());
  INFO(n.output);
  CHECK(n.status != 0);
  CHECK(n.has("not JSON"));

  const CliResult m = run_cli("explain --op merge_state --problem '{\"head_dim\": 64, \"dtype\": \"float16\"}' "
                              "--variant " + shell_quote(file.string()),
                              tmp.path());
  INFO(m.output);
  CHECK(m.status != 0);
  CHECK(m.has("takes no variant"));
}

TEST_CASE("attnjit prewarm --variant FILE compiles the attention problems with it", "[cli][user_variant]") {
  TempDir tmp;
  const fs::path cache = tmp.path() / "cache", manifest = tmp.path() / "serving.json",
                 file = tmp.path() / "cap.json";
  std::ofstream(file) << R"({"score_mod": "return p.cap * tanhf(s / p.cap);", "params": [{"name": "cap", "type": "f32"}]})";
  std::ofstream(manifest) << R"({"arch": "sm_80", "problems": [
    {"op": "single_decode", "num_qo_heads": 4, "num_kv_heads": 4, "head_dim": 64, "q_dtype": "float16",
     "kv_len": 100},
    {"op": "merge_state", "head_dim": 64, "dtype": "float16"}]})";
  const CliResult r = run_cli("prewarm --manifest " + shell_quote(manifest.string()) + " --variant " +
                                  shell_quote(file.string()) + " -j 2",
                              cache);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.has("0 failed"));
  const CliResult ls = run_cli("cache ls", cache);
  INFO(ls.output);
  CHECK(ls.has("_user"));
  CHECK(ls.has("merge_states_d64_f16_w4"));
}

}  // namespace attnjit::test

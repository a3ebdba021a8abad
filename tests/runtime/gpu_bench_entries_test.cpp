// `attnjit bench`'s batch_prefill and merge_state entries run every kind of
// problem they accept (ragged and paged, NHD and HND, fp8 pages, CUDA-graph
// mode, lse, a window; each merge function) and report the work each problem
// defines: the useful FLOPs of the (query, key) pairs a request's queries see
// and the merge's bytes, counted here from the definition.
#include <catch2/catch.hpp>

#include <cmath>

#include "attnjit/runtime.hpp"
#include "cuda/driver.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "ops/registry.hpp"

using namespace attnjit;
using attnjit::test::NonBlockingStream;
using json = nlohmann::json;

namespace {

// Pairs (query i, key j) visible: causal aligns query i of qo to key kv - qo + i; a window keeps window_left + 1 keys.
double pairs_by_definition(const std::vector<int>& qo, const std::vector<int>& kv, bool causal, int window) {
  double n = 0;
  for (size_t b = 0; b < qo.size(); ++b)
    for (int i = 0; i < qo[b]; ++i)
      for (int j = 0; j < kv[b]; ++j) {
        const int pos = kv[b] - qo[b] + i;
        n += (!causal || j <= pos) && (window < 0 || j >= pos - window);
      }
  return n;
}

}  // namespace

TEST_CASE("the batch_prefill bench runs every kind of problem and counts the visible pairs", "[gpu][batch_prefill]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  NonBlockingStream stream;
  const auto& op = ops::find_operator("batch_prefill");
  const std::vector<int> qo = {7, 130, 1, 0, 300}, kv = {7, 900, 4000, 5, 280};
  json base = {{"op", "batch_prefill"}, {"num_qo_heads", 8}, {"num_kv_heads", 2}, {"head_dim", 128},
               {"q_dtype", "bfloat16"}, {"qo_lens", qo},     {"kv_lens", kv}};
  std::vector<json> cases;
  for (const char* source : {"ragged", "paged"})
    for (bool causal : {false, true}) {
      json j = base;
      j["kv_source"] = source;
      j["causal"] = causal;
      cases.push_back(j);
    }
  json hnd = cases[3];  // paged, causal
  hnd.update({{"kv_layout", "HND"}, {"page_size", 5}, {"return_lse", true}, {"window_left", 50}});
  cases.push_back(hnd);
  json fp8 = cases[1];  // ragged, causal
  fp8.update({{"kv_dtype", "float8_e4m3fn"}, {"head_dim", 64}, {"k_scale", 0.5}, {"v_scale", 2.0}});
  cases.push_back(fp8);
  for (const char* source : {"ragged", "paged"}) {
    json graph = cases[source == std::string("ragged") ? 1 : 3];
    graph.update({{"use_cuda_graph", true}, {"max_batch_size", 8}});
    cases.push_back(graph);
  }
  for (const auto& c : cases) {
    INFO(c.dump());
    const ops::BenchFigures f = op.bench(rt, c, 0, stream.s);
    INFO(f.plan.dump());
    CHECK(std::isfinite(f.microseconds));
    CHECK(f.microseconds > 0);
    const double pairs = pairs_by_definition(qo, kv, c.value("causal", false), c.value("window_left", -1));
    CHECK(f.flops == Approx(4.0 * 8 * pairs * c.at("head_dim").get<int>()));
    CHECK(f.bytes > 0);
    CHECK(f.plan.at("plan_host_us").get<double>() > 0);
    CHECK((f.plan.at("describe").get<std::string>().find("cuda-graph") != std::string::npos) ==
          c.value("use_cuda_graph", false));
  }
  // The standard shapes are valid problems of the entry (the CLI runs them all).
  for (const auto& p : op.bench_problems()) CHECK_NOTHROW(op.kernels_for(p));
}

TEST_CASE("the merge_state bench runs each function and counts the states' bytes", "[gpu][merge_state]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  NonBlockingStream stream;
  const auto& op = ops::find_operator("merge_state");
  for (const char* function : {"merge_state", "merge_state_in_place", "merge_states"}) {
    json p = {{"op", "merge_state"}, {"function", function}, {"head_dim", 64},
              {"dtype", "float16"},  {"num_heads", 3},       {"seq_len", 1000}};
    const int n = function == std::string("merge_states") ? 5 : 2;
    if (n != 2) p["num_states"] = n;
    INFO(p.dump());
    const ops::BenchFigures f = op.bench(rt, p, 0, stream.s);
    CHECK(std::isfinite(f.microseconds));
    CHECK(f.microseconds > 0);
    const double state = 1000.0 * 3 * (64 * 2 + 4);  // V (fp16) and lse of one state
    CHECK(f.bytes == Approx((n + 1) * state));
  }
  CHECK_THROWS_WITH(op.bench(rt, {{"op", "merge_state"}, {"head_dim", 64}}, 0, stream.s),
                    Catch::Contains("needs num_heads >= 1 and seq_len >= 1"));
}

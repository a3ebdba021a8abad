// batch_prefill in the operator registry, on the CPU: its JSON form round
// trips and its checks name the field; kernels_for lists every kernel a plan
// chooses (random batches planned on several devices, each choice checked
// against the list) and nothing a plan never chooses; explain plans from
// JSON; a model's problems cover ragged and paged prefill.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>

#include "support/error_capture.hpp"
#include "ops/batch_prefill/batch_prefill_kernels.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/batch_prefill/batch_prefill_problem.hpp"
#include "ops/registry.hpp"

using namespace attnjit;
using attnjit::test::error_of;
using json = nlohmann::json;

namespace {

json base_problem(const char* source = "paged") {
  return {{"op", "batch_prefill"}, {"kv_source", source},   {"num_qo_heads", 32}, {"num_kv_heads", 8},
          {"head_dim", 128},       {"q_dtype", "bfloat16"}, {"causal", true}};
}

std::string names_of(const std::vector<KernelSpec>& specs) {
  std::string s;
  for (const auto& k : specs) s += k.name() + " ";
  return s;
}

// The devices the planner is asked about: Hopper (fa3 under "auto"), an A100
// and a small part (few SMs: KV splits and one-warpgroup tiles come sooner).
const ops::DeviceFigures kDevices[] = {
    {132, 227 * 1024, "sm_90a"}, {108, 163 * 1024, "sm_80"}, {16, 227 * 1024, "sm_90a"}};

// A batch of one of five kinds: short prompts, long prompts, short appends
// onto long caches, a mix of them, or requests without queries or KV.
std::pair<std::vector<int32_t>, std::vector<int32_t>> random_lengths(std::mt19937& rng) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int kind = uni(0, 4), batch = uni(1, kind == 1 ? 6 : 24);
  std::vector<int32_t> qo, kv;
  for (int b = 0; b < batch; ++b) {
    const int k = kind == 3 ? uni(0, 2) : kind;
    int q = 0, n = 0;
    if (k == 0) q = uni(1, 64), n = q + uni(0, 256);
    if (k == 1) q = uni(256, 3000), n = q + uni(0, 2000);
    if (k == 2) q = uni(1, 32), n = uni(500, 40000);
    if (k == 4) q = uni(0, 3), n = uni(0, 1) * uni(0, 100);
    qo.push_back(q);
    kv.push_back(n);
  }
  return {qo, kv};
}

// Plans the problem for these lengths on a device, as the wrapper does: in
// CUDA-graph mode a later plan keeps the first plan's query tile.
ops::BatchPrefillLayout plan_for(const ops::BatchPrefillProblem& p, const std::vector<int32_t>& qo,
                                 const std::vector<int32_t>& kv, const ops::DeviceFigures& device, int graph_frags_m) {
  ops::BatchPrefillProblem q = p;
  q.qo_lens = qo;
  q.kv_lens = kv;
  ops::BatchPrefillShape s = ops::planner_shape(q);
  s.graph_frags_m = graph_frags_m;
  return ops::plan_batch_prefill(s, device);
}

// Every kernel the plans of `problem` chose over `rounds` random batches
// (plus a long prompt, a short append onto a long cache and a tiny batch),
// in a random order, each checked against kernels_for's list.
std::set<std::string> chosen_kernels(const json& problem, std::mt19937& rng, int rounds) {
  const ops::BatchPrefillProblem p = ops::batch_prefill_problem_from_json(problem);
  std::set<std::string> listed, chosen;
  for (const auto& k : ops::batch_prefill_kernels(p)) listed.insert(k.name());
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> batches = {
      {{3000}, {3000}}, {{1}, {32768}}, {{4, 2}, {4, 9}}};
  for (int i = 0; i < rounds; ++i) batches.push_back(random_lengths(rng));
  for (const auto& device : kDevices) {
    if (p.options.backend == "fa3" && device.arch != "sm_90a") continue;  // refused there (Unsupported)
    // One wrapper per device; in CUDA-graph mode its first batch fixes the query tile.
    std::shuffle(batches.begin(), batches.end(), rng);
    int graph_frags_m = 0;
    for (const auto& [qo, kv] : batches) {
      if (p.use_cuda_graph && qo.size() > size_t(p.max_batch_size)) continue;
      const auto L = plan_for(p, qo, kv, device, graph_frags_m);
      if (p.use_cuda_graph) graph_frags_m = L.prefill.spec.as<PrefillKernel>()->frags_m;
      INFO(problem.dump() << " on " << device.arch << "/" << device.sm_count << " SMs: " << L.to_json().dump()
                          << "; listed: " << names_of(ops::batch_prefill_kernels(p)));
      CHECK(listed.count(L.prefill.spec.name()));
      chosen.insert(L.prefill.spec.name());
      if (L.merge) {
        CHECK(listed.count(L.merge->spec.name()));
        chosen.insert(L.merge->spec.name());
      }
    }
  }
  return chosen;
}

}  // namespace

TEST_CASE("batch_prefill problems round-trip through their JSON form", "[batch_prefill][registry]") {
  json j = base_problem();
  j.update({{"page_size", 32},
            {"kv_dtype", "float8_e5m2"},
            {"kv_layout", "HND"},
            {"pos_encoding_mode", "ROPE_LLAMA"},
            {"window_left", 100},
            {"logits_soft_cap", 30.0},
            {"sm_scale", 0.1},
            {"rope_theta", 5e5},
            {"backend", "fa2"},
            {"use_cuda_graph", true},
            {"max_batch_size", 8},
            {"device", 1},
            {"return_lse", true},
            {"k_scale", 0.5},
            {"qo_lens", {3, 0, 100}},
            {"kv_lens", {10, 0, 4000}}});
  const auto p = ops::batch_prefill_problem_from_json(j);
  CHECK(p.source == KVSource::Paged);
  CHECK(p.page_size == 32);
  CHECK(p.kv_dtype == DType::E5M2);
  CHECK(p.max_batch_size == 8);
  CHECK(p.kv_lens == std::vector<int32_t>{10, 0, 4000});
  const json back = ops::to_json(p);
  CHECK(ops::to_json(ops::batch_prefill_problem_from_json(back)) == back);
  CHECK(back.at("rope_theta") == 5e5f);

  // One length for every request: written back as lists; either side defaults to the other.
  json uniform = base_problem("ragged");
  uniform.update({{"batch_size", 3}, {"qo_len", 7}, {"kv_len", 50}});
  const auto u = ops::batch_prefill_problem_from_json(uniform);
  CHECK(u.qo_lens == std::vector<int32_t>{7, 7, 7});
  CHECK(u.kv_lens == std::vector<int32_t>{50, 50, 50});
  CHECK(u.page_size == 0);
  CHECK_FALSE(ops::to_json(u).contains("page_size"));
  uniform = base_problem();
  uniform["kv_len"] = 4096;  // what `attnjit explain --kv-len 4096` adds: one fresh prompt
  const auto fresh = ops::batch_prefill_problem_from_json(uniform);
  CHECK(fresh.qo_lens == std::vector<int32_t>{4096});
  CHECK(fresh.page_size == 16);  // paged: the default page
  // No lengths: the kernel set alone.
  CHECK_FALSE(ops::batch_prefill_problem_from_json(base_problem()).has_lengths());
  CHECK_FALSE(ops::to_json(ops::batch_prefill_problem_from_json(base_problem())).contains("kv_lens"));
}

TEST_CASE("batch_prefill problems are checked field by field, naming the field, value and what is allowed",
          "[batch_prefill][registry]") {
  auto err = [](const json& j, Status s = Status::InvalidArgument) {
    return error_of([&] { ops::batch_prefill_problem_from_json(j); }, s);
  };
  auto with = [](json j, const json& extra) {
    j.update(extra);
    return j;
  };
  const json b = base_problem();
  CHECK_THAT(err(with(b, {{"heads", 4}})), Catch::Contains("problem.heads is not a batch_prefill field; allowed:"));
  CHECK_THAT(err(with(b, {{"kv_source", "contiguous"}})),
             Catch::Contains("kv_source='contiguous' is not allowed; allowed: 'ragged'"));
  CHECK_THAT(err(with(b, {{"kv_source", 3}})),
             Catch::Contains("problem.kv_source=3 is not allowed; expected a string"));
  CHECK_THAT(err(with(b, {{"page_size", 0}})), Catch::Contains("page_size=0 is not allowed; it must be >= 1"));
  CHECK_THAT(err(with(base_problem("ragged"), {{"page_size", 16}})),
             Catch::Contains("page_size=16 is not allowed with kv_source='ragged'"));
  CHECK_THAT(err(with(b, {{"use_cuda_graph", true}})),
             Catch::Contains("max_batch_size=0 is not allowed with use_cuda_graph=true; it must be >= 1"));
  CHECK_THAT(err(with(b, {{"max_batch_size", 4}})),
             Catch::Contains("max_batch_size=4 is not allowed with use_cuda_graph=false"));
  CHECK_THAT(err(with(b, {{"use_cuda_graph", true}, {"max_batch_size", 2}, {"batch_size", 3}, {"kv_len", 9}})),
             Catch::Contains("batch_size=3 is not allowed with use_cuda_graph=true; allowed: 1 to max_batch_size=2"));
  CHECK_THAT(err(with(b, {{"use_cuda_graph", "yes"}})),
             Catch::Contains("problem.use_cuda_graph=\"yes\" is not allowed; expected true or false"));
  CHECK_THAT(err(with(b, {{"kv_dtype", "float8_e4m3fn"}, {"backend", "fa3"}}), Status::Unsupported),
             Catch::Contains("backend='fa3' takes 16-bit K/V; kv_dtype=float8_e4m3fn is not supported there"));
  CHECK_THAT(err(with(b, {{"backend", "fa4"}})), Catch::Contains("backend='fa4' is not a backend"));
  CHECK_THAT(err(with(b, {{"head_dim", 96}}), Status::Unsupported), Catch::Contains("head_dim=96 is not supported"));
  CHECK_THAT(err(with(b, {{"num_kv_heads", 5}})), Catch::Contains("multiple of num_kv_heads=5"));
  CHECK_THAT(err(with(b, {{"kv_dtype", "float16"}})),
             Catch::Contains("k.dtype=float16 is not allowed with q.dtype=bfloat16"));
  CHECK_THAT(err(with(b, {{"allow_fp16_qk_reduction", true}}), Status::Unsupported),
             Catch::Contains("use_fp16_qk_reduction=true is not supported"));
  CHECK_THAT(err(with(b, {{"qo_lens", {1, 2}}, {"kv_lens", {3}}})),
             Catch::Contains("problem.kv_lens: 1 requests is not allowed; qo_lens has 2"));
  CHECK_THAT(err(with(b, {{"qo_lens", {1, -2}}})),
             Catch::Contains("problem.qo_lens[1]=-2 is not allowed; each length must be an integer in [0, "));
  CHECK_THAT(err(with(b, {{"kv_lens", json::array()}})), Catch::Contains("problem.kv_lens=[] is not allowed"));
  CHECK_THAT(err(with(b, {{"qo_len", 4}, {"kv_lens", {3}}})),
             Catch::Contains("qo_len/kv_len and qo_lens/kv_lens are not allowed together"));
  CHECK_THAT(err(with(b, {{"batch_size", 2}})), Catch::Contains("problem.batch_size=2 is not allowed without lengths"));
  CHECK_THAT(err(with(b, {{"batch_size", 2}, {"kv_lens", {3}}})),
             Catch::Contains("problem.batch_size=2 is not allowed; the length lists hold 1 requests"));
  CHECK_THAT(err(with(b, {{"kv_len", "long"}})), Catch::Contains("problem.kv_len=\"long\" is not allowed"));
  CHECK_THAT(err(with(b, {{"batch_size", 2}, {"qo_len", 300000000}, {"kv_len", 1}})),
             Catch::Contains("sum(qo_lens) * num_qo_heads="));
  CHECK_THAT(err(with(b, {{"device", -1}})), Catch::Contains("device=-1 is not allowed"));
  CHECK_THAT(err(json::array()), Catch::Contains("a batch_prefill problem must be a JSON object"));
  // A plan needs lengths.
  CHECK_THAT(error_of([&] { ops::find_operator("batch_prefill").explain(b, {132}); }, Status::InvalidArgument),
             Catch::Contains("no lengths; a plan needs qo_lens and kv_lens"));
}

TEST_CASE("batch_prefill's kernels_for lists every kernel its plans choose, for random batches on several devices",
          "[batch_prefill][registry][planner]") {
  std::mt19937 rng(29);
  auto pick = [&](auto... values) {
    const std::vector<std::common_type_t<decltype(values)...>> v = {values...};
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  int problems = 0;
  for (int i = 0; i < 150; ++i) {
    const int kv_heads = pick(1, 2, 8), d = pick(64, 128, 256);
    const std::string q = pick("float16", "bfloat16");
    const std::string kv = pick(q, q, std::string("float8_e4m3fn"), std::string("float8_e5m2"));
    json j = {{"op", "batch_prefill"},
              {"kv_source", pick("ragged", "paged")},
              {"num_qo_heads", kv_heads * pick(1, 2, 4, 8)},
              {"num_kv_heads", kv_heads},
              {"head_dim", d},
              {"q_dtype", q},
              {"kv_dtype", kv},
              {"pos_encoding_mode", pick("NONE", "ROPE_LLAMA", "ALIBI")},
              {"window_left", pick(-1, -1, 64)},
              {"backend", kv == q ? pick("auto", "auto", "fa2", "fa3") : pick("auto", "fa2")}};
    const std::string mask = pick("none", "causal", "custom");
    if (mask != "none") j[mask == "causal" ? "causal" : "custom_mask"] = true;
    if (pick(0, 1)) j["logits_soft_cap"] = 50.0;
    if (pick(0, 0, 1)) {
      j["use_cuda_graph"] = true;
      j["max_batch_size"] = 24;
    }
    chosen_kernels(j, rng, 12);
    ++problems;
  }
  CHECK(problems == 150);
}

TEST_CASE("batch_prefill's kernels_for lists nothing its plans never choose", "[batch_prefill][registry][planner]") {
  // Under "auto" the Hopper device runs fa3 (16-bit K/V) and the A100 fa2:
  // together the plans reach every kernel listed.
  std::mt19937 rng(7);
  for (const char* source : {"ragged", "paged"})
    for (int d : {64, 128, 256})
      for (const char* kv : {"bfloat16", "float8_e4m3fn"})
        for (bool graph : {false, true}) {
          json j = base_problem(source);
          j["head_dim"] = d;
          j["kv_dtype"] = kv;
          if (graph) {
            j["use_cuda_graph"] = true;
            j["max_batch_size"] = 24;
          }
          std::set<std::string> listed;
          for (const auto& k : ops::find_operator("batch_prefill").kernels_for(j)) listed.insert(k.name());
          // Graph mode keeps its first plan's tile: fresh wrappers (one per batch) reach both fa2 tiles.
          std::set<std::string> chosen;
          if (graph) {
            std::mt19937 r(1);
            for (int i = 0; i < 30; ++i) {
              const auto one = chosen_kernels(j, r, 1);
              chosen.insert(one.begin(), one.end());
            }
          } else {
            chosen = chosen_kernels(j, rng, 20);
          }
          INFO(j.dump());
          CHECK(chosen == listed);
        }
}

TEST_CASE("batch_prefill explains its plan from JSON alone, CUDA-graph mode included", "[batch_prefill][registry]") {
  const auto& op = ops::find_operator("batch_prefill");
  json j = base_problem("ragged");
  j.update({{"qo_lens", {1, 1}}, {"kv_lens", {32768, 30000}}});
  const json plan = op.explain(j, {132});
  INFO(plan.dump());
  CHECK(plan.at("batch_size") == 2);
  CHECK(plan.at("num_chunks").get<int>() > 1);  // short appends onto long caches split their KV
  REQUIRE(plan.at("kernels").size() == 2);
  for (const auto& k : plan.at("kernels")) CHECK_NOTHROW(KernelSpec::from_json(k.at("spec")));
  CHECK(plan.at("kernels")[1].at("role") == "merge");
  CHECK(plan.at("problem").at("kv_lens") == json({32768, 30000}));

  json g = base_problem("paged");
  g.update({{"use_cuda_graph", true}, {"max_batch_size", 4}, {"qo_lens", {1, 1}}, {"kv_lens", {32768, 30000}}});
  const json graph_plan = op.explain(g, {132});
  CHECK(graph_plan.at("cuda_graph") == true);
  CHECK(graph_plan.at("num_chunks") == 1);  // never split
  REQUIRE(graph_plan.at("kernels").size() == 1);
  CHECK(graph_plan.at("kernels")[0].at("kernel").get<std::string>().find("_paged") != std::string::npos);
}

TEST_CASE("a model's batch_prefill problems are ragged and paged causal prefill, fp8 pages included",
          "[batch_prefill][registry]") {
  // prewarm --model lists every operator's model_problems -> kernels_for (llama-3.1-8b's shape).
  std::set<std::string> names;
  for (const auto& op : ops::operators())
    for (const auto& problem : op.model_problems({32, 8, 128, 0.f}))
      for (const auto& k : op.kernels_for(problem)) names.insert(k.name());
  for (const char* want :
       {"prefill_d128_m1_s2_bf16_bf16_bf16_none_causal_ragged",
        "prefill_fa3ws_d128_s2_bf16_bf16_bf16_none_causal_paged",  // "auto" on sm_90a
        "prefill_fa3ws_d128_s2_f16_f16_f16_none_causal_ragged",
        "prefill_d128_m2_s2_bf16_e4m3_bf16_none_causal_paged", "merge_states_d128_bf16_w4_in_bf16"}) {
    INFO(want);
    CHECK(names.count(want));
  }
  // The soft cap of the model reaches the kernels.
  for (const auto& p : ops::find_operator("batch_prefill").model_problems({16, 8, 256, 50.f})) {
    CHECK(p.at("logits_soft_cap") == 50.f);
    CHECK(p.at("causal") == true);
    for (const auto& k : ops::find_operator("batch_prefill").kernels_for(p))
      if (const auto* pk = k.as<PrefillKernel>()) CHECK(pk->variant.soft_cap);
  }
}

#include "ops/operator_entries.hpp"

#include "ops/batch_prefill/batch_prefill_kernels.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/batch_prefill/batch_prefill_problem.hpp"

namespace attnjit::ops {

namespace {

// The plan for the problem's lengths, as the wrapper's plan() makes it (in
// CUDA-graph mode, its first plan: later ones keep that plan's query tile).
nlohmann::json explain(const nlohmann::json& problem, const DeviceFigures& device) {
  const BatchPrefillProblem p = batch_prefill_problem_from_json(problem);
  const BatchPrefillLayout L = plan_batch_prefill(planner_shape(p), device);
  nlohmann::json j = L.to_json();
  j["batch_size"] = p.kv_lens.size();
  j["problem"] = to_json(p);
  return j;
}

nlohmann::json grid_problem(const char* source, int head_dim, const char* q, const char* kv, const char* mask,
                            const char* pos, bool cap, int window) {
  nlohmann::json p = {{"op", "batch_prefill"}, {"kv_source", source},      {"num_qo_heads", 8},
                      {"num_kv_heads", 2},     {"head_dim", head_dim},     {"q_dtype", q},
                      {"kv_dtype", kv},        {"pos_encoding_mode", pos}, {"window_left", window}};
  if (std::string(mask) == "causal") p["causal"] = true;
  if (std::string(mask) == "custom") p["custom_mask"] = true;
  if (cap) p["logits_soft_cap"] = 30.0;
  return p;
}

// Batch prefill's kernels differ from single prefill's only in the KV source
// (the skeletons and variant hooks compile in full in single_prefill's grid),
// so each source gets each skeleton and query tile (fa2 16 and 32 rows a
// warp and the Hopper kernel "auto" plans, listed by the "auto" problems;
// fa3 at one and two warpgroups by name, since "auto" takes fa3_ws wherever
// it serves), each head dim, mask mode and positional encoding once, and the
// fp8 load path.
std::vector<nlohmann::json> variant_grid() {
  auto fa3 = [](nlohmann::json p) {
    p["backend"] = "fa3";
    return p;
  };
  return {
      fa3(grid_problem("ragged", 128, "bfloat16", "bfloat16", "causal", "NONE", false, -1)),
      fa3(grid_problem("paged", 64, "float16", "float16", "custom", "ROPE_LLAMA", true, 128)),
      grid_problem("ragged", 128, "bfloat16", "bfloat16", "causal", "NONE", false, -1),
      grid_problem("ragged", 64, "float16", "float16", "custom", "ROPE_LLAMA", false, -1),
      grid_problem("ragged", 256, "bfloat16", "bfloat16", "none", "ALIBI", true, 256),
      grid_problem("ragged", 128, "float16", "float8_e5m2", "causal", "NONE", false, 128),
      grid_problem("paged", 128, "bfloat16", "bfloat16", "causal", "NONE", false, -1),
      grid_problem("paged", 64, "float16", "float16", "none", "ALIBI", true, -1),
      grid_problem("paged", 256, "bfloat16", "bfloat16", "custom", "ROPE_LLAMA", false, 256),
      grid_problem("paged", 64, "bfloat16", "float8_e4m3fn", "causal", "ROPE_LLAMA", false, -1),
  };
}

// A serving deployment (vLLM's and SGLang's FlashInfer backends) prefills
// causally through both wrappers: ragged for new tokens, paged for chunked
// prefill and prefix-cached requests, whose paged cache may be fp8 e4m3.
// RoPE is applied before attention there (pos_encoding_mode NONE). The
// kernels depend on neither the page size nor CUDA-graph mode (whose kernels
// are among these).
std::vector<nlohmann::json> model_problems(const ModelShape& m) {
  std::vector<nlohmann::json> out;
  for (const char* q : {"bfloat16", "float16"})
    for (const auto& [source, kv] :
         {std::pair{"ragged", q}, std::pair{"paged", q}, std::pair{"paged", "float8_e4m3fn"}})
      out.push_back(m.problem(
          {{"op", "batch_prefill"}, {"kv_source", source}, {"q_dtype", q}, {"kv_dtype", kv}, {"causal", true}}));
  return out;
}

}  // namespace

OperatorEntry batch_prefill_entry() {
  return {"batch_prefill",
          "many query tokens of each request in a batch against its ragged or paged KV, on tensor cores "
          "(flashinfer BatchPrefillWithRaggedKVCacheWrapper, BatchPrefillWithPagedKVCacheWrapper)",
          kernels_from_json<batch_prefill_problem_from_json, batch_prefill_kernels>,
          explain,
          variant_grid,
          model_problems,
          batch_prefill_bench_problems,
          batch_prefill_bench};
}

}  // namespace attnjit::ops

#include "ops/operator_entries.hpp"

#include "ops/single_prefill/single_prefill_planner.hpp"
#include "ops/single_prefill/single_prefill_problem.hpp"

namespace attnjit::ops {

namespace {

nlohmann::json explain(const nlohmann::json& problem, const DeviceFigures& device) {
  const SinglePrefillProblem p = single_prefill_problem_from_json(problem);
  nlohmann::json j = plan_single_prefill(p, device).to_json();
  j["problem"] = to_json(p);
  return j;
}

// Every axis of the prefill kernel, each value at least once, without the
// cross product (each problem also lists its merge kernel and, for head_dim
// 64, both query tiles): head dims x dtypes, mask modes rotating through
// them, and each encoding x cap pair once with a window on one of them.
// About 35 prefill kernels: the grid runs on CI's 2-core machine.
std::vector<nlohmann::json> variant_grid() {
  std::vector<nlohmann::json> out;
  auto problem = [](int d, const char* dtype, int group, const char* mask, const char* pos, bool cap, int window) {
    nlohmann::json p = {{"op", "single_prefill"}, {"num_qo_heads", 2 * group}, {"num_kv_heads", 2},
                        {"head_dim", d},          {"q_dtype", dtype},          {"pos_encoding_mode", pos},
                        {"qo_len", 1024},         {"kv_len", 1024},            {"window_left", window}};
    if (std::string(mask) == "causal") p["causal"] = true;
    if (std::string(mask) == "custom") p["custom_mask"] = true;
    if (cap) p["logits_soft_cap"] = 30.0;
    return p;
  };
  const char* const masks[] = {"none", "causal", "custom"};
  int turn = 0;
  for (int d : {64, 128, 256})
    for (const char* dtype : {"float16", "bfloat16"}) out.push_back(problem(d, dtype, 4, masks[turn++ % 3], "NONE", false, -1));
  for (const char* pos : {"NONE", "ROPE_LLAMA", "ALIBI"})
    for (bool cap : {false, true}) out.push_back(problem(128, "bfloat16", 1, "causal", pos, cap, cap ? 256 : -1));
  // fa3 by name ("auto" takes fa3_ws wherever it serves): each head dim, RoPE with a soft cap and a window.
  for (auto p : {problem(64, "bfloat16", 4, "causal", "NONE", false, -1),
                 problem(128, "float16", 1, "custom", "ROPE_LLAMA", true, 256),
                 problem(256, "bfloat16", 2, "none", "ALIBI", false, -1)}) {
    p["backend"] = "fa3";
    out.push_back(p);
  }
  // fp8 KV (its register load path), once per fp8 format.
  auto fp8 = problem(128, "bfloat16", 4, "causal", "NONE", false, -1);
  fp8["kv_dtype"] = "float8_e4m3fn";
  out.push_back(fp8);
  fp8 = problem(64, "float16", 2, "none", "ROPE_LLAMA", false, -1);
  fp8["kv_dtype"] = "float8_e5m2";
  out.push_back(fp8);
  return out;
}

// Causal prefill in the model's dtype(s), with and without RoPE, and the model's soft cap.
std::vector<nlohmann::json> model_problems(const ModelShape& m) {
  std::vector<nlohmann::json> out;
  for (const char* q : {"bfloat16", "float16"})
    for (const char* pos : {"NONE", "ROPE_LLAMA"})
      out.push_back(
          m.problem({{"op", "single_prefill"}, {"q_dtype", q}, {"pos_encoding_mode", pos}, {"causal", true}}));
  return out;
}

}  // namespace

OperatorEntry single_prefill_entry() {
  return {"single_prefill",
          "many query tokens of one request against its KV, on tensor cores "
          "(flashinfer.single_prefill_with_kv_cache)",
          kernels_from_json<single_prefill_problem_from_json, single_prefill_kernels>,
          explain,
          variant_grid,
          model_problems,
          single_prefill_bench_problems,
          single_prefill_bench};
}

}  // namespace attnjit::ops

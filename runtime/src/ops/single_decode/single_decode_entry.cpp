#include "ops/operator_entries.hpp"

#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_decode/single_decode_problem.hpp"

namespace attnjit::ops {

namespace {

// Problems that together reach every kernel the planner generates along each
// axis: head dims x dtype pairs x group sizes (every heads-per-CTA choice of
// both skeletons) x tensor cores asked or not, with the positional encoding
// and soft cap rotating through those (they are independent hooks), plus every
// encoding x cap pair on one shape of each skeleton. A full cross product
// would be ~1200 kernels: hours of NVRTC in CI for no more coverage.
std::vector<nlohmann::json> variant_grid() {
  std::vector<nlohmann::json> out;
  const std::vector<std::pair<const char*, const char*>> dtypes = {
      {"float16", "float16"},      {"bfloat16", "bfloat16"},      {"bfloat16", "float8_e4m3fn"},
      {"float16", "float8_e5m2"},  {"float16", "float8_e4m3fn"},  {"bfloat16", "float8_e5m2"}};
  const char* const encodings[] = {"NONE", "ROPE_LLAMA", "ALIBI"};
  auto problem = [](int d, const char* q, const char* kv, int group, bool tc, const char* pos, bool cap) {
    nlohmann::json p = {{"op", "single_decode"}, {"num_qo_heads", 2 * group}, {"num_kv_heads", 2},
                        {"head_dim", d}, {"q_dtype", q}, {"kv_dtype", kv}, {"pos_encoding_mode", pos},
                        {"use_tensor_cores", tc}, {"kv_len", 4096}};
    if (cap) p["logits_soft_cap"] = 30.0;
    return p;
  };
  int turn = 0;
  for (int d : {64, 128, 256})
    for (auto [q, kv] : dtypes)
      for (int group : {1, 2, 3, 4, 5, 7, 8, 16})
        for (bool tc : {false, true}) {
          out.push_back(problem(d, q, kv, group, tc, encodings[turn % 3], turn % 2 == 1));
          ++turn;
        }
  for (const char* pos : encodings)
    for (bool cap : {false, true})
      for (bool tc : {false, true}) out.push_back(problem(128, "bfloat16", "bfloat16", 4, tc, pos, cap));
  return out;
}

// q in {bfloat16, float16}; KV in q's dtype or fp8; positional encoding NONE
// or ROPE_LLAMA; the model's soft cap. kv_len is left at 1: the kernel set
// does not depend on it.
std::vector<nlohmann::json> model_problems(const ModelShape& m) {
  std::vector<nlohmann::json> out;
  for (const char* q : {"bfloat16", "float16"})
    for (const char* kv : {q, "float8_e4m3fn", "float8_e5m2"})
      for (const char* pos : {"NONE", "ROPE_LLAMA"})
        out.push_back(
            m.problem({{"op", "single_decode"}, {"q_dtype", q}, {"kv_dtype", kv}, {"pos_encoding_mode", pos}}));
  return out;
}

}  // namespace

OperatorEntry single_decode_entry() {
  return {"single_decode",
          "one query token per head against one request's KV cache (flashinfer.single_decode_with_kv_cache)",
          kernels_from_json<single_decode_problem_from_json, single_decode_kernels>,
          explain_plan<SingleDecodeProblem, single_decode_problem_from_json, plan_single_decode, to_json>,
          variant_grid,
          model_problems,
          single_decode_bench_problems,
          single_decode_bench};
}

}  // namespace attnjit::ops

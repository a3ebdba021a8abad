#include "ops/operator_entries.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "ops/merge_state/merge_state_problem.hpp"

namespace attnjit::ops {

namespace {

std::vector<KernelSpec> kernels_for(const nlohmann::json& problem) {
  const MergeStateProblem p = merge_state_problem_from_json(problem);
  return {merge_state_kernel(p.head_dim, p.dtype)};
}

nlohmann::json explain(const nlohmann::json& problem, const DeviceFigures& /*device: one CTA per row anywhere*/) {
  const MergeStateProblem p = merge_state_problem_from_json(problem);
  if (!p.has_sizes())
    throw Error(Status::InvalidArgument,
                fmt::format("problem: num_heads={} and seq_len={} do not give a launch; a plan needs both (num_heads "
                            ">= 1, seq_len >= 0)",
                            p.num_heads, p.seq_len));
  const MergeKernel k = merge_state_kernel(p.head_dim, p.dtype);
  const LaunchShape s = merge_state_shape(k, p.seq_len * p.num_heads);
  const nlohmann::json launch = {{"role", "merge"},
                                 {"kernel", k.name()},
                                 {"spec", KernelSpec(k).to_json()},
                                 {"grid", {s.grid[0], s.grid[1], s.grid[2]}},
                                 {"threads", s.threads},
                                 {"smem_bytes", s.smem_bytes}};
  return {{"kernels", nlohmann::json::array({launch})},
          {"rows", p.seq_len * p.num_heads},
          {"num_states", p.num_states},
          {"problem", to_json(p)}};
}

// Every kernel: each head dim in each dtype (6 specs), the functions rotating through them.
std::vector<nlohmann::json> variant_grid() {
  std::vector<nlohmann::json> out;
  const char* const functions[] = {"merge_state", "merge_state_in_place", "merge_states"};
  int turn = 0;
  for (int d : {64, 128, 256})
    for (const char* dtype : {"float16", "bfloat16"})
      out.push_back({{"op", "merge_state"}, {"function", functions[turn++ % 3]}, {"head_dim", d}, {"dtype", dtype}});
  return out;
}

// Cascade attention (vLLM) and ragged + paged prefill (SGLang) merge their
// levels' states in the model's dtype.
std::vector<nlohmann::json> model_problems(const ModelShape& m) {
  std::vector<nlohmann::json> out;
  for (const char* dtype : {"bfloat16", "float16"})
    out.push_back({{"op", "merge_state"}, {"head_dim", m.head_dim}, {"dtype", dtype}, {"num_heads", m.num_qo_heads}});
  return out;
}

}  // namespace

OperatorEntry merge_state_entry() {
  return {"merge_state",
          "merges attention states (V, base-2 lse) computed over disjoint KV ranges "
          "(flashinfer.cascade merge_state, merge_state_in_place, merge_states)",
          kernels_for,
          explain,
          variant_grid,
          model_problems,
          merge_state_bench_problems,
          merge_state_bench};
}

}  // namespace attnjit::ops

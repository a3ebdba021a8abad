// The operator contract. Every operator (single and batch decode, single and
// batch prefill, the page helpers, merge_state) is built the same way, in its
// own folder ops/<op>/; what the attention operators share of their options
// lives in ops/attention_options/:
//
//   Problem      a plain struct: shapes, dtypes, options. Built from tensors
//                in one place (<op>_problem.cpp) and from its JSON form (the
//                prewarm manifest's "problems" entries).
//   normalize    fills defaults (sm_scale, rope, o dtype) so equal problems compare equal.
//   validate     once, in one place; Error(InvalidArgument/Unsupported) naming the field.
//   plan         (problem, DeviceFigures) -> the kernels it needs with their launch
//                shapes and a WorkspaceLayout of named regions. Pure host code,
//                deterministic, no compiled kernel needed. A plan that needs index
//                arrays uploads them in the op's Plan constructor, on the caller's stream.
//   fill + run   at run time: check the tensors against the plan, fill the one
//                params struct per kernel, launch. Never allocates, compiles or syncs.
//
// OperatorEntry is the type-erased face of that contract, for the tools that
// treat operators alike: the CLI's prewarm, explain and bench, and the
// compile-every-variant test. ops/registry.cpp lists the entries, one line
// each; ops/operator_entries.hpp declares them.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "attnjit/config.hpp"
#include "ops/launch_shape.hpp"
#include "ops/workspace_layout.hpp"
#include "spec/kernel_spec.hpp"

namespace attnjit {
class Runtime;
}

namespace attnjit::ops {

// What the planner knows of a device: data, never a query of the GPU, so
// `explain` can plan for a named device on a machine without one.
struct DeviceFigures {
  int sm_count = 132;  // H100 SXM / H200
  // The most dynamic shared memory a block may opt in to (H100/H200: 227 KB;
  // A100 163 KB; sm_86/89/120: 99 KB). A kernel choice that would need more
  // falls back to one that fits where there is one.
  int smem_per_block = 227 * 1024;
  // The arch its kernels compile for ("sm_90a": Hopper-only skeletons may run).
  std::string arch = "sm_90a";
  // Not the device's but the runtime's (Config::persistent_prefill): whether
  // fa3_ws prefill plans persistent CTAs.
  Config::Persistence persistent_prefill = Config::Persistence::Auto;
};

struct KernelLaunch {
  std::string role;  // "decode", "merge"
  KernelSpec spec;
  LaunchShape shape;
};
// A launch as the planners' JSON (explain, bench) shows it: role, kernel name, spec, grid, threads, smem.
nlohmann::json launch_json(const KernelLaunch& k);
// A launch as a plan's describe() opens: "<kernel> grid=(x,y,z) threads=<n> smem=<bytes>".
std::string launch_text(const KernelLaunch& k);
// A plan's kernels as explain shows them: its main launch, then the merge if it has one.
nlohmann::json kernels_json(const KernelLaunch& main, const std::optional<KernelLaunch>& merge);

// The attention shape of a model (prewarm --model): each operator turns it into
// the problems a deployment of that model can hit.
struct ModelShape {
  int num_qo_heads = 0, num_kv_heads = 0, head_dim = 0;
  float logits_soft_cap = 0;  // 0: none

  // An operator's problem (its op, dtypes and own fields) for this model: the
  // model's head counts, head_dim and soft cap (where it has one) added.
  nlohmann::json problem(nlohmann::json j) const {
    j["num_qo_heads"] = num_qo_heads;
    j["num_kv_heads"] = num_kv_heads;
    j["head_dim"] = head_dim;
    if (logits_soft_cap > 0) j["logits_soft_cap"] = logits_soft_cap;
    return j;
  }
};

// Figures of one timed run, for `attnjit bench`.
struct BenchFigures {
  double microseconds = 0;
  double bytes = 0;  // memory traffic the operator must do at least (decode: K and V)
  double flops = 0;  // useful floating-point work (prefill)
  nlohmann::json plan;  // what the plan chose
};

struct OperatorEntry {
  const char* name;     // "single_decode": the "op" of a manifest problem
  const char* summary;  // one line for `attnjit explain --list-ops`

  // Normalizes and validates a problem's JSON form, then lists every kernel the
  // problem may need whatever its lengths (prewarm compiles them all).
  std::vector<KernelSpec> (*kernels_for)(const nlohmann::json& problem);
  // The plan the problem gets on a device with these figures (explain).
  nlohmann::json (*explain)(const nlohmann::json& problem, const DeviceFigures& device);
  // Problems that together use every kernel variant the operator can generate.
  std::vector<nlohmann::json> (*variant_grid)();
  // The problems a deployment of a model hits (prewarm --model).
  std::vector<nlohmann::json> (*model_problems)(const ModelShape& model);
  // The standard benchmark shapes, and one timed run of a problem on a device
  // (random inputs larger than L2, rotated; median of many launches).
  std::vector<nlohmann::json> (*bench_problems)();
  BenchFigures (*bench)(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);
};

// An entry's kernels_for where the operator's kernel list takes the whole
// problem: read it from JSON (normalized and validated), then list.
template <auto ProblemFromJson, auto KernelsOf>
std::vector<KernelSpec> kernels_from_json(const nlohmann::json& problem) {
  return KernelsOf(ProblemFromJson(problem));
}

// An entry's explain where the plan takes only the problem and the device: the
// plan's JSON with the normalized problem under "problem".
template <class Problem, Problem (*FromJson)(const nlohmann::json&), auto PlanOf,
          nlohmann::json (*ToJson)(const Problem&)>
nlohmann::json explain_plan(const nlohmann::json& problem, const DeviceFigures& device) {
  const Problem p = FromJson(problem);
  nlohmann::json j = PlanOf(p, device).to_json();
  j["problem"] = ToJson(p);
  return j;
}

}  // namespace attnjit::ops

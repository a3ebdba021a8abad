// The state merges' problem for the operator registry (prewarm manifests,
// explain, bench), from JSON and back, its checks, and what the three merge
// functions (merge_state.cpp) launch: one kernel per head dim and dtype, one
// CTA per output row.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

#include "attnjit/types.hpp"
#include "ops/launch_shape.hpp"
#include "spec/merge_kernel.hpp"

namespace attnjit::ops {

enum class MergeFunction : uint8_t { MergeState, MergeStateInPlace, MergeStates };
const char* to_string(MergeFunction f) noexcept;  // "merge_state", "merge_state_in_place", "merge_states"

struct MergeStateProblem {
  MergeFunction function = MergeFunction::MergeState;
  int head_dim = 0;
  DType dtype = DType::BF16;  // of V (the states' outputs) and the merged V
  // Optional (explain, bench); the kernel depends on neither.
  int num_heads = 0;     // 0: not given
  int64_t seq_len = -1;  // -1: not given
  int num_states = 2;    // merge_states: >= 1; the others merge 2
  int device = 0;

  bool has_sizes() const { return num_heads > 0 && seq_len >= 0; }
};

// {"op": "merge_state", "function": "merge_state" (default) |
// "merge_state_in_place" | "merge_states", "head_dim", "dtype", "num_heads",
// "seq_len", "num_states" (merge_states), "device"}. Unknown keys and wrongly
// typed values are errors naming the key.
MergeStateProblem merge_state_problem_from_json(const nlohmann::json& j);
nlohmann::json to_json(const MergeStateProblem& p);
// Throws Error(InvalidArgument / Unsupported) naming the field, its value and what is allowed.
void validate(const MergeStateProblem& p);

// The merge kernel for states of V in `dtype` (its input and output type).
MergeKernel merge_state_kernel(int head_dim, DType dtype);
// One CTA per output row (sequence position x head).
LaunchShape merge_state_shape(const MergeKernel& k, int64_t rows);

}  // namespace attnjit::ops

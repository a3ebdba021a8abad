// What an attention plan that splits the KV adds: a merge launch of one CTA
// per output row, and the split states it reads from the caller's workspace.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/operator.hpp"

namespace attnjit::ops {

// The merge kernel of f32 split states into o_dtype, and its launch over `rows` output rows.
MergeKernel split_merge_kernel(int head_dim, DType o_dtype);
KernelLaunch merge_launch(int head_dim, DType o_dtype, uint32_t rows);
// "partial_o" ([states, rows, head_dim] f32) and "partial_lse" ([states, rows] f32).
void add_split_states(WorkspaceLayout& workspace, size_t states, size_t rows, int head_dim);

}  // namespace attnjit::ops

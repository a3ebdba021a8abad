#include "ops/split_states.hpp"

namespace attnjit::ops {

MergeKernel split_merge_kernel(int head_dim, DType o_dtype) {
  MergeKernel merge;
  merge.head_dim = head_dim;
  merge.o_dtype = o_dtype;
  return merge;
}

KernelLaunch merge_launch(int head_dim, DType o_dtype, uint32_t rows) {
  const MergeKernel merge = split_merge_kernel(head_dim, o_dtype);
  KernelLaunch launch{"merge", merge, {}};
  launch.shape.threads = merge.threads();
  launch.shape.grid[0] = rows;
  return launch;
}

void add_split_states(WorkspaceLayout& workspace, size_t states, size_t rows, int head_dim) {
  workspace.add_float("partial_o", states * rows * size_t(head_dim) * sizeof(float));
  workspace.add_float("partial_lse", states * rows * sizeof(float));
}

}  // namespace attnjit::ops

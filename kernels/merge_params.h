// Parameters of the merge kernel (merge.cuh), included by host and device code.
#pragma once
#include "platform.cuh"

namespace attnjit {
namespace kernels {

// Merges per-split partial states (normalized o and base-2 lse) of `num_rows`
// rows (a row = one query token of one head) into the final output.
struct MergeParams {
  const float* partial_o;    // [num_splits, num_rows, head_dim]
  const float* partial_lse;  // [num_splits, num_rows]
  void* o;                   // row r at o + r * o_stride_row
  float* lse;                // [num_rows] or null
  int64_t o_stride_row;
  int32_t num_rows;
  int32_t num_splits;
};

}  // namespace kernels
}  // namespace attnjit

// Parameters of the merge kernel (merge.cuh), included by host and device code.
#pragma once
#include "platform.cuh"

namespace attnjit {
namespace kernels {

// Merges per-split partial states (normalized o and base-2 lse) of `num_rows`
// rows (a row = one query token of one head) into the final output.
struct MergeParams {
  const void* partial_o;     // [num_splits, num_rows, head_dim] in the input type (decode, prefill: f32)
  const float* partial_lse;  // [num_splits, num_rows]
  void* o;                   // row r at o + r * o_stride_row
  float* lse;                // [num_rows] or null
  int64_t o_stride_row;
  int32_t num_rows;
  int32_t num_splits;
  // Other input layouts (merge_state, merge_states): row r is sequence
  // position r / heads, head r % heads; its state s starts at element
  //   in_seq_stride * (r / heads) + in_head_stride * (r % heads) + in_state_stride * s
  // of partial_o, and its lse at the same form with the lse_* strides.
  // heads == 0 means the packed layout above, and the strides are ignored.
  int32_t heads;
  int64_t in_seq_stride, in_head_stride, in_state_stride;
  int64_t lse_seq_stride, lse_head_stride, lse_state_stride;
  const uint8_t* row_mask;   // null: every row; else [sequence positions]: rows whose byte is 0 are not written
};

}  // namespace kernels
}  // namespace attnjit

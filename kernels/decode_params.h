// Kernel parameter blocks, included by both the host (planner, launcher) and
// the generated device code, so their layout cannot drift. Each kernel takes
// exactly one of these by value as a __grid_constant__ argument.
#pragma once
#include "platform.cuh"

namespace attnjit {
namespace kernels {

// Positional-encoding modes; values are part of the generated code's key.
enum PosEncodingMode : int32_t { kPosNone = 0, kPosRopeLlama = 1, kPosAlibi = 2 };

struct DecodeParams {
  const void* q;        // [num_qo_heads, head_dim]
  const void* k;        // element (row, head, d) at row*k_stride_n + head*k_stride_h + d
  const void* v;
  void* o;              // [num_qo_heads, head_dim] when num_splits == 1
  float* lse;           // [num_qo_heads], base 2; may be null
  float* partial_o;     // [num_splits, num_qo_heads, head_dim] when num_splits > 1
  float* partial_lse;   // [num_splits, num_qo_heads]
  int64_t q_stride_h;
  int64_t o_stride_h;
  int64_t k_stride_n, k_stride_h;
  int64_t v_stride_n, v_stride_h;
  int32_t kv_len;       // the query sits at position kv_len - 1
  int32_t kv_begin;     // first row inside the window (0 without one)
  int32_t chunk_size;   // rows per split; split s covers [kv_begin + s*chunk, ...)
  int32_t num_splits;
  int32_t num_qo_heads;
  int32_t group_size;   // num_qo_heads / num_kv_heads
  float sm_scale;       // softmax scale with q_scale * k_scale folded in
  float v_scale;        // applied to the output
  float soft_cap;       // > 0 only in soft-cap variants
  float rope_rcp_scale; // 1 / rope_scale
  float rope_log2_theta;
};

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

namespace attnjit {
namespace kernels {

// Dynamic shared memory of the decode kernel: one (m, d, o[head_dim]) state
// per warp and head for the cross-warp merge. Shared by host and device so the
// launch and the kernel agree.
ATTNJIT_HOST_DEVICE constexpr int decode_smem_bytes(int warps, int heads_per_cta, int head_dim) {
  return warps * heads_per_cta * (head_dim + 2) * 4;
}

}  // namespace kernels
}  // namespace attnjit

namespace attnjit {
namespace kernels {

// Dynamic shared memory of the tensor-core decode kernel: double-buffered K and
// V tiles of 16 rows per warp plus a 16-row Q tile, 16-bit, rows padded by 8
// elements; reused afterwards for the cross-warp merge (fp32 states).
ATTNJIT_HOST_DEVICE constexpr int decode_mma_smem_bytes(int warps, int head_dim) {
  return (4 * 16 * warps + 16) * (head_dim + 8) * 2 > warps * 16 * (head_dim + 2) * 4
             ? (4 * 16 * warps + 16) * (head_dim + 8) * 2
             : warps * 16 * (head_dim + 2) * 4;
}

}  // namespace kernels
}  // namespace attnjit

// Parameters of the decode kernels (decode.cuh, decode_mma.cuh), included by
// both the host (planner, launcher) and the generated device code, so their
// layout cannot drift. Each kernel takes exactly one params struct by value as
// a __grid_constant__ argument. The KV cache and the variant's scalars come
// in the structs every family shares.
#pragma once
#include "kv_source_params.h"
#include "platform.cuh"
#include "variant_params.h"

namespace attnjit {
namespace kernels {

struct DecodeParams {
  const void* q;        // [num_qo_heads, head_dim]
  void* o;              // [num_qo_heads, head_dim] when num_splits == 1
  float* lse;           // [num_qo_heads], base 2; may be null
  float* partial_o;     // [num_splits, num_qo_heads, head_dim] when num_splits > 1
  float* partial_lse;   // [num_splits, num_qo_heads]
  int64_t q_stride_h;
  int64_t o_stride_h;
  KVSourceParams kv;    // the kernel reads the sequence length from here (kv_source.cuh)
  VariantParams var;
  int32_t kv_len;       // as planned (single decode: equals kv.kv_len); kernels read the length, and
                        // so the query position length - 1, through the KV source
  int32_t kv_begin;     // first row inside the window (0 without one)
  int32_t chunk_size;   // rows per split; split s covers [kv_begin + s*chunk, ...)
  int32_t num_splits;
  int32_t num_qo_heads;
  int32_t group_size;   // num_qo_heads / num_kv_heads
};

// Dynamic shared memory of the decode kernel: one (m, d, o[head_dim]) state
// per warp and head for the cross-warp merge. Shared by host and device so the
// launch and the kernel agree.
ATTNJIT_HOST_DEVICE constexpr int decode_smem_bytes(int warps, int heads_per_cta, int head_dim) {
  return warps * heads_per_cta * (head_dim + 2) * 4;
}

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

// Parameters of the prefill kernel (prefill.cuh), included by host and device
// code so their layout cannot drift. One struct serves single, ragged and
// paged prefill: the KV source type (a template parameter) says how
// KVSourceParams is read, and a null qo_indptr / work list means one request
// whose CTAs are the grid's coordinates.
#pragma once
#include "fast_divmod.h"
#include "kv_source_params.h"
#include "platform.cuh"
#include "variant_params.h"

namespace attnjit {
namespace kernels {

struct PrefillParams {
  const void* q;        // token n of the batch, head h at q + n * q_stride_n + h * q_stride_h
  void* o;              // the same indexing with o's strides, when num_chunks == 1
  float* lse;           // [total tokens, num_qo_heads], base 2; may be null
  // num_chunks > 1: normalized partial states of row (token * num_qo_heads + head)
  // of chunk c at partial_o + (c * num_rows + row) * head_dim and partial_lse[c * num_rows + row],
  // combined afterwards by the merge kernel (merge.cuh).
  float* partial_o;
  float* partial_lse;
  int64_t q_stride_n, q_stride_h;
  int64_t o_stride_n, o_stride_h;
  KVSourceParams kv;    // K/V and each request's length, read through the KV source
  VariantParams var;
  // fp8 queries (q, K and V e4m3: the warp-specialized Hopper kernel only):
  // per-head dequantization scales in float32, or null for 1. scale_q is
  // [num_qo_heads], scale_k and scale_v [num_kv_heads]: a score is
  // (q8 . k8) sq[h] sk[kv head] before var's sm_scale, the output
  // (P v8) sv[kv head] before var's v_scale. Scalar scales fold into var.
  const float* scale_q;
  const float* scale_k;
  const float* scale_v;
  const int32_t* qo_indptr;  // [batch + 1] query rows of each request; null: one request of qo_len rows
  // q's (and o's) rows: each request's qo_indptr pair must lie within them
  // (prefill_schedule.cuh checks it; bad pairs are recorded in kv.check).
  int32_t q_rows;
  // Batch work list, one entry per CTA, 4 * num_work ints: requests, then
  // query tiles, KV chunks, KV heads. Null (single request): num_work query
  // tiles; with tiles_fastest CTA x takes tile x % num_work of KV head
  // x / num_work (every tile costs the same: one head's tiles run side by
  // side and share its K/V in L2), else tile num_work - 1 - x / num_kv_heads
  // of KV head x % num_kv_heads (causal: the tiles that see the most keys
  // first); chunk blockIdx.y.
  const int32_t* work;
  int32_t num_work;
  int32_t tiles_fastest;
  // CUDA-graph mode (work null, tile_indptr set): a fixed grid of persistent
  // CTAs takes the batch's (query tile, KV head) items, read from the device
  // so a replayed graph follows the latest plan. tile_indptr [batch_size + 1]
  // is the running count of query tiles per request (requests past the
  // plan's batch have none); items are numbered KV head fastest, the last
  // tiles first, and each CTA grabs the next one from work_counter[0]
  // (work_counter[1] counts the CTAs done; the last one zeroes both for the
  // next launch). Each item covers the request's whole KV (no split).
  const int32_t* tile_indptr;
  int32_t* work_counter;
  int32_t batch_size;
  int32_t qo_len;       // single request only
  int32_t num_qo_heads;
  // num_qo_heads / num_kv_heads: the query heads packed into a tile's rows.
  // Built on the host: every packed row is split into (token, head) by it,
  // per Q row, per mask row and per output row, and a run-time integer
  // division is ~20 instructions (ncu at 512-token prefill: a third of the
  // instructions outside the KV loop).
  FastDivmod group;
  int32_t chunk_size;   // KV rows per chunk (a multiple of the KV tile); chunk c covers [c * chunk_size, ...)
  int32_t num_chunks;
  int32_t num_rows;     // total tokens * num_qo_heads (partial state rows)
};

// The CTA's query tile: 16 rows per MMA fragment, frags_m fragments per warp, 4 warps.
ATTNJIT_HOST_DEVICE constexpr int prefill_tile_q(int frags_m) { return 4 * 16 * frags_m; }
// KV rows per pipeline stage: 64, or 32 for 256-wide heads in a ring of
// two or more stages (their O is 128 accumulators per thread even with one
// fragment per warp, and two 64-key stages would leave one CTA per SM).
// One stage (stages == 1) holds one K and one V buffer, waited on apart:
// 64 keys fit there at 256 wide. (sm_90a, ptxas: 128-wide heads with two
// fragments fit S and O of 64 keys in 255 registers once the per-row query
// positions and KV row offsets no longer stay live across the loop; a
// 64-key tile halves the per-tile barrier, row-max shuffles and Q fragment
// loads against 32.) 512-wide heads: 32 keys, so that one stage (Q, K and a
// V slice: 116,736 B) fits an sm_80 block as well as sm_90's.
ATTNJIT_HOST_DEVICE constexpr int prefill_tile_kv(int head_dim, int stages) {
  return head_dim <= 128 || (stages == 1 && head_dim <= 256) ? 64 : 32;
}
// The CTAs that share one query tile's output dims: 512-wide heads split V
// and O into two 256-wide slices (a CTA's O would otherwise be 256
// accumulators per thread); each CTA computes S = Q K^T over all 512 dims.
ATTNJIT_HOST_DEVICE constexpr int prefill_vo_parts(int head_dim) { return head_dim > 256 ? 2 : 1; }
// Dynamic shared memory: the Q tile, `stages` K tiles and `stages` V tiles
// (one slice wide), 16-bit, rows padded by 8 elements (ldmatrix without bank
// conflicts).
ATTNJIT_HOST_DEVICE constexpr int prefill_smem_bytes(int head_dim, int frags_m, int stages) {
  return (prefill_tile_q(frags_m) + stages * prefill_tile_kv(head_dim, stages)) * (head_dim + 8) * 2 +
         stages * prefill_tile_kv(head_dim, stages) * (head_dim / prefill_vo_parts(head_dim) + 8) * 2;
}

// The Hopper skeleton (prefill_sm90.cuh): one or two warpgroups of 64 query
// rows, tiles in 128-byte swizzled blocks (no padding) from a 1024-byte
// aligned base: 1 KB more than the tiles, for the alignment. KV tiles of 128
// rows at one CTA per SM; 64 rows for 256-wide heads (their O is already 128
// accumulators per thread) and at two CTAs per SM (128 registers a thread).
ATTNJIT_HOST_DEVICE constexpr int prefill_sm90_tile_q(int warpgroups) { return 64 * warpgroups; }
ATTNJIT_HOST_DEVICE constexpr int prefill_sm90_tile_kv(int head_dim, int ctas_per_sm) {
  return head_dim <= 128 && ctas_per_sm == 1 ? 128 : 64;
}
ATTNJIT_HOST_DEVICE constexpr int prefill_sm90_smem_bytes(int head_dim, int warpgroups, int stages, int ctas_per_sm) {
  return 1024 +
         (prefill_sm90_tile_q(warpgroups) + 2 * stages * prefill_sm90_tile_kv(head_dim, ctas_per_sm)) * head_dim * 2;
}

}  // namespace kernels
}  // namespace attnjit

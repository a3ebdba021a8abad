// What a prefill CTA works on, shared by the prefill skeletons (prefill.cuh
// on mma.sync, prefill_sm90.cuh on wgmma): its items (request, query tile,
// KV chunk, KV head) from the planner's work list, the grid, or in
// CUDA-graph mode a counter; and for one item the query rows and the KV
// tiles it covers (PrefillExtent).
#pragma once
#include "kv_source.cuh"
#include "prefill_params.h"

namespace attnjit {

extern __shared__ __align__(16) unsigned char attnjit_prefill_smem[];

// The CTA's share of the work: from the planner's list (batch, one entry
// per CTA, in the order CTAs start) or the grid (single). Longest work
// first, so the short items fill the last wave (ncu: a causal prefill in
// tile order kept SMs idle 31% of the time waiting for the last tiles); the
// query tiles that read the same K/V side by side, so they share it in L2.
struct PrefillWork {
  int request, q_tile, chunk, kv_head;
};
ATTNJIT_DEVICE PrefillWork prefill_work(const kernels::PrefillParams& p) {
  const int x = blockIdx.x, n = p.num_work;
  if (p.work) return {p.work[x], p.work[n + x], p.work[2 * n + x], p.work[3 * n + x]};
  if (p.tiles_fastest) return {0, x % n, int(blockIdx.y), x / n};
  const int num_kv_heads = p.num_qo_heads / p.group.d;
  return {0, n - 1 - x / num_kv_heads, int(blockIdx.y), x % num_kv_heads};
}

// CUDA-graph mode: item j is query tile j / num_kv_heads of the batch for
// KV head j % num_kv_heads; the tile's request is found in the running tile
// counts (requests without tiles are skipped: the search lands on the last
// request whose count does not exceed the tile, which holds it).
ATTNJIT_DEVICE PrefillWork prefill_graph_work(const kernels::PrefillParams& p, int j) {
  const int num_kv_heads = p.num_qo_heads / p.group.d;
  const int tile = j / num_kv_heads;
  int lo = 0, hi = p.batch_size;  // tile_indptr[lo] <= tile < tile_indptr[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (p.tile_indptr[mid] <= tile) lo = mid;
    else hi = mid;
  }
  return {lo, tile - p.tile_indptr[lo], 0, j % num_kv_heads};
}

// One item's extent: the request's query rows, the tile's first packed row
// (packed row pr is token pr / group, head pr % group of the KV head's
// group), the KV rows its chunk lets it see and the KV tiles covering them.
struct PrefillExtent {
  int qo_begin, qo_len, packed_len, row0;
  int kv_len, pos_offset;           // query i sits at pos_offset + i
  int min_q_pos, max_q_pos;         // of the tile's rows
  int kv_begin, kv_end, tile0, num_tiles;
};

template <int TileQ, int TileKV, int MaskMode, bool Window>
ATTNJIT_DEVICE PrefillExtent prefill_extent(const kernels::PrefillParams& p, const PrefillWork& w, int kv_len) {
  PrefillExtent e;
  e.qo_begin = p.qo_indptr ? p.qo_indptr[w.request] : 0;
  e.qo_len = p.qo_indptr ? p.qo_indptr[w.request + 1] - e.qo_begin : p.qo_len;
  e.packed_len = e.qo_len * p.group.d;
  e.row0 = w.q_tile * TileQ;
  e.kv_len = kv_len;
  e.pos_offset = kv_len - e.qo_len;
  e.min_q_pos = e.pos_offset + int(p.group.div(e.row0));
  e.max_q_pos = e.pos_offset + min(e.qo_len - 1, int(p.group.div(e.row0 + TileQ - 1)));
  // The keys any row of the tile may see within this chunk: causal ends at
  // the last query, the window starts at the first query's window.
  e.kv_begin = w.chunk * p.chunk_size;
  e.kv_end = min(kv_len, e.kv_begin + p.chunk_size);
  if constexpr (MaskMode == kernels::kMaskCausal) e.kv_end = min(e.kv_end, e.max_q_pos + 1);
  if constexpr (Window)
    if (p.var.window_left >= 0) e.kv_begin = max(e.kv_begin, e.min_q_pos - p.var.window_left);
  e.tile0 = e.kv_begin / TileKV * TileKV;  // chunks start on tile boundaries: tile0 stays inside the chunk
  e.num_tiles = e.kv_end > e.kv_begin ? (e.kv_end - e.tile0 + TileKV - 1) / TileKV : 0;
  return e;
}

// The CTA's items: its own one (from the work list or the grid), or in
// CUDA-graph mode the next free item of the batch, grabbed from a counter
// until none is left: the last tiles (the most keys, with causal masks) go
// first and CTAs that drew cheap ones take more, so the wave ends together.
// One call site, so the tile's code is inlined once.
template <class TileFn>
ATTNJIT_DEVICE void prefill_items(const kernels::PrefillParams& p, TileFn&& tile) {
  const bool persistent = p.tile_indptr != nullptr;
  const int total = persistent ? p.tile_indptr[p.batch_size] * (p.num_qo_heads / p.group.d) : 1;
  __shared__ int grabbed;
  for (int n = 0;; ++n) {
    if (persistent) {
      if (threadIdx.x == 0) grabbed = atomicAdd(p.work_counter, 1);
      __syncthreads();  // the previous item's closing barrier orders this write after every read of it
    }
    const int i = persistent ? grabbed : n;
    if (i >= total) break;
    tile(persistent ? prefill_graph_work(p, total - 1 - i) : prefill_work(p));
    __syncthreads();  // the next tile's Q lands in the smem this one staged its output in
  }
  // The last CTA out zeroes the counters for the next launch (stream-ordered
  // after this one): every other CTA has stopped grabbing by then.
  if (persistent && threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(p.work_counter + 1, 1) == int(gridDim.x) - 1) {
      atomicExch(p.work_counter, 0);
      atomicExch(p.work_counter + 1, 0);
    }
  }
}

}  // namespace attnjit

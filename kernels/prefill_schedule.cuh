// What a prefill CTA works on, and the edges of its work, shared by the
// prefill skeletons (prefill.cuh on mma.sync, prefill_sm90.cuh on wgmma):
// its items (request, query tile, KV chunk, KV head) from the planner's work
// list, the grid, or in CUDA-graph mode a counter; for one item the query
// rows and the KV tiles it covers (PrefillExtent), the packed-row addressing
// (PackedRows), staging its Q tile (prefill_stage_q), rotating staged rows
// (prefill_rotate_staged) and writing its rows or
// partial states (PrefillOutput). The tile types only need at(row, col).
#pragma once
#include "cp_async.cuh"
#include "kv_source.cuh"
#include "math.cuh"
#include "mma.cuh"
#include "numeric.cuh"
#include "prefill_params.h"

namespace attnjit {

extern __shared__ __align__(16) unsigned char attnjit_prefill_smem[];

// The CTA's share of the work: from the planner's list (batch, one entry
// per CTA, in the order CTAs start) or the grid (single). Longest work
// first, so the short items fill the last wave (ncu: a causal prefill in
// tile order kept SMs idle 31% of the time waiting for the last tiles); the
// query tiles that read the same K/V side by side, so they share it in L2.
// With 512-wide heads each item is two CTAs, side by side in launch order
// (their K/V reads meet in L2), each taking its slice `vo_part` of V and O.
struct PrefillWork {
  int request, q_tile, chunk, kv_head;
  int vo_part = 0;
};
// Item x (blockIdx.x, or blockIdx.x / VoParts).
ATTNJIT_DEVICE PrefillWork prefill_work(const kernels::PrefillParams& p, int x) {
  const int n = p.num_work;
  if (p.work) return {p.work[x], p.work[n + x], p.work[2 * n + x], p.work[3 * n + x]};
  if (p.tiles_fastest) return {0, x % n, int(blockIdx.y), x / n};
  const int num_kv_heads = p.num_qo_heads / p.group.d;
  return {0, n - 1 - x / num_kv_heads, int(blockIdx.y), x % num_kv_heads};
}
ATTNJIT_DEVICE PrefillWork prefill_work(const kernels::PrefillParams& p) { return prefill_work(p, blockIdx.x); }

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

// A KV head's packed rows: packed row pr is query token pr / group, query
// head kv_head * group + pr % group (the GQA group shares one tile).
struct PackedRows {
  const kernels::PrefillParams& p;
  int group, kv_head;
  ATTNJIT_DEVICE PackedRows(const kernels::PrefillParams& params, int kv_head_)
      : p(params), group(params.group.d), kv_head(kv_head_) {}
  ATTNJIT_DEVICE void operator()(int pr, int& token, int& head) const {
    uint32_t tok, in_group;
    p.group.divmod(pr, tok, in_group);
    token = int(tok);
    head = kv_head * group + int(in_group);
  }
  // Packed row pr's variant: its query head and token (a padding row past
  // the request's qo_len rows borrows the last token).
  template <class Variant>
  ATTNJIT_DEVICE Variant variant(int request, int pr, int kv_len, int qo_len) const {
    int token, head;
    (*this)(pr, token, head);
    return Variant(p.var, request, head, p.num_qo_heads, kv_len, qo_len, min(token, qo_len - 1));
  }
};

// The tile's Q rows into `tile` (any shared-memory tile with at(row, col))
// by cp.async, Passes passes of RowsPerPass rows; a thread copies the 16
// bytes from 16-bit column dim0 of its row in each (fp8, ElemBytes 1: the
// bytes from 2 dim0, columns of the tile counted in 16-bit units). Packed
// rows past the request are zero-filled.
template <int Passes, int RowsPerPass, int ElemBytes = 2, class Tile>
ATTNJIT_DEVICE void prefill_stage_q(const kernels::PrefillParams& p, const PackedRows& token_head, int row0,
                                    int packed_len, int qo_begin, const Tile& tile, int row_in_pass, int dim0) {
  const char* q = static_cast<const char*>(p.q);
#pragma unroll
  for (int s = 0; s < Passes; ++s) {
    const int r = s * RowsPerPass + row_in_pass, pr = row0 + r;
    const bool valid = pr < packed_len;
    int token, head;
    token_head(valid ? pr : 0, token, head);
    const int64_t elem = int64_t(qo_begin + token) * p.q_stride_n + int64_t(head) * p.q_stride_h;
    const char* src = ElemBytes == 2 ? q + (elem + dim0) * 2 : q + elem + dim0 * 2;
    cp_async_16(tile.at(r, dim0), src, valid);
  }
}

// A staged tile's rows rewritten in place (RoPE on Q once, on every K tile
// as it lands): Passes passes of RowsPerPass rows, a thread rotating the
// eight elements from dim0 of its row in each; rotate(f, r) gets them as
// floats with the row's index in the tile, and they go back as StoreT (the
// Q K^T operand type: RopeQKType). The caller publishes the tile (a
// barrier, and on Hopper the async-proxy fence) before the MMAs read it.
template <int Passes, int RowsPerPass, class T, class StoreT = T, class Tile, class Rotate>
ATTNJIT_DEVICE void prefill_rotate_staged(const Tile& tile, int row_in_pass, int dim0, Rotate rotate) {
#pragma unroll
  for (int s = 0; s < Passes; ++s) {
    const int r = s * RowsPerPass + row_in_pass;
    frag8 f = load_smem8<T>(tile.at(r, dim0));
    rotate(f, r);
    store_smem8<StoreT>(tile.at(r, dim0), f);
  }
}

// Where a tile's output goes. Unsplit, each row is normalized into the
// staging tile (the warp's own Q rows, which nothing reads any more) and
// flush() then stores whole rows 16 bytes at a time; split, the normalized
// f32 partial state goes straight from the fragments, with its lse. D is
// the slice of the output this CTA computes, from dim vo0 of rows RowD wide
// (a 512-wide head's two CTAs write the same lse, both the same value).
template <int D, class OT, class Tile, int RowD = D>
struct PrefillOutput {
  const kernels::PrefillParams& p;
  const PackedRows& token_head;
  int row0, packed_len, qo_begin, chunk;
  bool split;
  Tile staging;
  int vo0 = 0;

  // Tile row r, held by this thread (t = lane % 4) as half h of the
  // fragments o, with its running max m and sum d.
  ATTNJIT_DEVICE void row(const frag_c (&o)[D / 8], int h, int r, int t, float m, float d) const {
    const int pr = row0 + r;
    const float inv = d > 0.f ? p.var.v_scale / d : 0.f;
    const bool valid = pr < packed_len;
    int token, head;
    token_head(valid ? pr : 0, token, head);
    const int64_t out_row = int64_t(qo_begin + token) * p.num_qo_heads + head;
    if (!split) {
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        st_shared_u32(staging.at(r, n * 8 + 2 * t), pack2<OT>(o[n].x[2 * h] * inv, o[n].x[2 * h + 1] * inv));
    } else if (valid) {
      float* dst = p.partial_o + (int64_t(chunk) * p.num_rows + out_row) * RowD + vo0;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<float2*>(dst + n * 8 + 2 * t) = make_float2(o[n].x[2 * h] * inv, o[n].x[2 * h + 1] * inv);
    }
    if (valid && t == 0) {
      const float lse = d > 0.f ? m + ptx_log2(d) : neg_inf();
      if (split) p.partial_lse[int64_t(chunk) * p.num_rows + out_row] = lse;
      else if (p.lse) p.lse[out_row] = lse;
    }
  }

  // Unsplit: the warp's Rows staged rows from row_begin to o.
  template <int Rows>
  ATTNJIT_DEVICE void flush(int row_begin, int lane) const {
    if (split) return;
    constexpr int kLanesPerRow = D / 8;
    __syncwarp();
    char* out = static_cast<char*>(p.o);
    for (int item = lane; item < Rows * kLanesPerRow; item += 32) {
      const int r = row_begin + item / kLanesPerRow, d0 = (item % kLanesPerRow) * 8;
      const int pr = row0 + r;
      if (pr >= packed_len) continue;
      int token, head;
      token_head(pr, token, head);
      *reinterpret_cast<uint4*>(out + ((qo_begin + token) * p.o_stride_n + head * p.o_stride_h + vo0 + d0) * 2) =
          ld_shared_v4(staging.at(r, d0));
    }
  }
};

// One item's extent: the request's query rows, the tile's first packed row
// (packed row pr is token pr / group, head pr % group of the KV head's
// group), the KV rows its chunk lets it see and the KV tiles covering them.
struct PrefillExtent {
  int qo_begin, qo_len, packed_len, row0;
  int kv_len, pos_offset;           // query i sits at pos_offset + i
  int min_q_pos, max_q_pos;         // of the tile's rows
  int kv_begin, kv_end, tile0, num_tiles;
};

// A batch request's query rows, qo_indptr[b] .. qo_indptr[b+1], checked
// against q's rows (in CUDA-graph mode qo_indptr is the caller's buffer,
// which may change after plan()): a bad pair is recorded (unless !report)
// and read as a request without rows, whose items then compute and write
// nothing. The record is a call, not inlined: inlined, its code cost the
// paged fa2 loop 9 spilled loads (ptxas, d128 causal).
__device__ __noinline__ void report_query_indptr(const kernels::PrefillParams& p, int request, int first, int next) {
  if (first < 0 || first > p.q_rows)
    report_table_fault(p.kv.check, kernels::kFaultQueryIndptr, p.kv.check_names, -1, request, request, first, 0,
                       p.q_rows);
  else
    report_table_fault(p.kv.check, kernels::kFaultQueryIndptr, p.kv.check_names, -1, request + 1, request, next,
                       first, p.q_rows);
}
ATTNJIT_DEVICE void prefill_query_rows(const kernels::PrefillParams& p, int request, int& begin, int& len,
                                       bool report) {
  const int first = p.qo_indptr[request], next = p.qo_indptr[request + 1];
  const bool ok = first >= 0 && first <= next && next <= p.q_rows;
  if (!ok && report) report_query_indptr(p, request, first, next);
  begin = ok ? first : 0;
  len = ok ? next - first : 0;
}

// Report false: a bad qo_indptr pair is read as no rows without recording
// it, for a role whose CTA has another that records it (the warp-specialized
// producer, whose 24 registers spill around the call).
template <int TileQ, int TileKV, int MaskMode, bool Window, bool Report = true>
ATTNJIT_DEVICE PrefillExtent prefill_extent(const kernels::PrefillParams& p, const PrefillWork& w, int kv_len) {
  PrefillExtent e;
  e.qo_begin = 0;
  e.qo_len = p.qo_len;
  if (p.qo_indptr) prefill_query_rows(p, w.request, e.qo_begin, e.qo_len, Report);
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
// One call site, so the tile's code is inlined once. VoParts CTAs (or, in
// CUDA-graph mode, consecutive items) share each item, one slice each.
template <int VoParts = 1, class TileFn>
ATTNJIT_DEVICE void prefill_items(const kernels::PrefillParams& p, TileFn&& tile) {
  const bool persistent = p.tile_indptr != nullptr;
  const int total = persistent ? p.tile_indptr[p.batch_size] * (p.num_qo_heads / p.group.d) * VoParts : 1;
  __shared__ int grabbed;
  for (int n = 0;; ++n) {
    if (persistent) {
      if (threadIdx.x == 0) grabbed = atomicAdd(p.work_counter, 1);
      __syncthreads();  // the previous item's closing barrier orders this write after every read of it
    }
    const int i = persistent ? grabbed : n;
    if (i >= total) break;
    if constexpr (VoParts == 1) {
      tile(persistent ? prefill_graph_work(p, total - 1 - i) : prefill_work(p));
    } else {  // (one branch instantiated: still one call site)
      const int item = persistent ? total - 1 - i : int(blockIdx.x);
      PrefillWork w = persistent ? prefill_graph_work(p, item / VoParts) : prefill_work(p, item / VoParts);
      w.vo_part = item % VoParts;
      tile(w);
    }
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

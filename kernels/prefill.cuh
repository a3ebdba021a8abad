// Prefill / append attention on tensor cores (FlashAttention-2 style), one
// skeleton for single, ragged and paged KV: the KV source type says where a
// request's rows live, the attention variant (variant.cuh) says which keys a
// query sees and how q.k becomes a logit. Nothing here knows about masks,
// caps or encodings beyond calling those hooks.
//
// A CTA takes one (request, query tile, KV chunk) and one KV head (prefill_work),
// or in CUDA-graph mode takes items from a counter until none is left. The query
// tile packs the KV head's group: packed row r is token r / group_size, head
// r % group_size of that group (a host-built FastDivmod splits it), so a GQA
// group shares every K/V tile it loads.
// Four warps each own 16 * FragsM rows. Per KV tile of kTileKV rows:
//
//   S = Q K^T          mma.m16n8k16, f32 accumulators, operands by ldmatrix
//   S -> scores        variant.score, masked entries -inf (only tiles that need it);
//                      the softmax scale is applied in the exponent (one FFMA)
//   online softmax     fragment_softmax.cuh: m, d per row; O rescaled
//   O += P V           P re-packed from the S accumulators as A fragments;
//                      its row sums (d) on the tensor cores too, P times ones
//
// K and V tiles stream through a kStages-deep cp.async ring in shared memory,
// so the copies of the next tiles overlap this one's math (fp8 K/V go through
// registers instead, widened to q's dtype; their scales are folded into
// sm_scale and v_scale). With RoPE the staged Q (once) and K tiles are
// rotated in shared memory before use (bf16 written back as f16, for an f16
// Q K^T: RopeQKType).
//
// 512-wide heads: two CTAs per item (prefill_vo_parts), each computing S
// over all 512 q/k dims but P V and O only for its 256-wide slice of V and
// O (a whole O would be 256 accumulators a thread). Q K^T is done twice:
// 1.5x the flops of one pass, the price of this first 512 path.
//
// Causal attention aligns the queries to the end of the KV: query i of qo_len
// sits at position kv_len - qo_len + i and sees keys up to there. With more
// than one KV chunk the CTA writes a normalized partial state (o, lse) that
// merge.cuh combines.
#pragma once
#include "cp_async.cuh"
#include "fragment_softmax.cuh"
#include "kv_source.cuh"
#include "kv_tile_walk.cuh"
#include "mma.cuh"
#include "numeric.cuh"
#include "prefill_params.h"
#include "prefill_schedule.cuh"
#include "smem_tile.cuh"
#include "tile_scores.cuh"
#include "variant.cuh"

namespace attnjit {

template <int HeadDim, int FragsM, class QT, class KVT, class OT, int PosMode, bool SoftCap, int MaskMode, bool Window,
          template <class> class KVSourceT, int Stages>
struct PrefillTraits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256 || HeadDim == 512,
                "prefill supports head_dim 64, 128, 256, 512");
  static_assert(FragsM == 1 || FragsM == 2, "16 or 32 query rows per warp");
  static_assert(Stages >= 1 && Stages <= 4, "1 to 4 pipeline stages");
  static_assert(storage_bytes<QT>::value == 2, "q is 16-bit (the tensor cores' input type)");
  static constexpr int kHeadDim = HeadDim;  // of q and k (S = Q K^T), and of a whole o row
  // The CTA's slice of V and O: the whole head but at 512 (prefill_vo_parts).
  static constexpr int kVoParts = kernels::prefill_vo_parts(HeadDim);
  static constexpr int kHeadDimVO = HeadDim / kVoParts;
  static_assert(kHeadDimVO <= 256 && (kHeadDimVO < 256 || FragsM == 1), "O is at most 128 accumulators a thread");
  static constexpr int kFragsM = FragsM;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRowsPerWarp = 16 * FragsM;
  static constexpr int kTileQ = kernels::prefill_tile_q(FragsM);
  static constexpr int kTileKV = kernels::prefill_tile_kv(HeadDim, Stages);
  static constexpr int kStages = Stages;
  // One stage: one K and one V buffer, each waited on by itself (below).
  static constexpr bool kSplitKV = Stages == 1;
  // Copies: a thread moves one 16-byte slice of a row, the CTA kRowsPerPass rows at a time.
  static constexpr int kLanesPerRow = HeadDim / 8;
  static constexpr int kRowsPerPass = kThreads / kLanesPerRow;
  // RoPE pairs dim d with d + D/2. Up to 256 wide the slice holding the
  // partner is lane kLanesPerRow / 2 away in the same warp; a 512-wide row
  // spans two warps, so its rotation takes the slices in another order (the
  // bits for 128 and 256 dims swapped: rope_slice) that puts the partner 16
  // lanes away.
  static constexpr int kRopePartner = kLanesPerRow <= 32 ? kLanesPerRow / 2 : 16;
  static ATTNJIT_DEVICE int rope_slice(int slice) {
    if constexpr (kLanesPerRow <= 32) return slice;
    else return (slice & 15) | ((slice & 16) << 1) | ((slice & 32) >> 1);
  }
  static constexpr int kQPasses = kTileQ / kRowsPerPass;
  static constexpr int kKVPasses = kTileKV / kRowsPerPass;
  static constexpr int kSmemBytes = kernels::prefill_smem_bytes(HeadDim, FragsM, Stages);
  static constexpr int kMaskMode = MaskMode;
  static constexpr bool kWindow = Window;
  using q_t = QT;  // also the tensor cores' input type
  using kv_t = KVT;
  using o_t = OT;
  using KVSource = KVSourceT<KVT>;
  using Variant = AttentionVariant<PosMode, SoftCap, MaskMode, Window>;
};

// One (request, query tile, KV chunk) for one KV head.
template <class Tr>
ATTNJIT_DEVICE void prefill_tile(const kernels::PrefillParams& p, const PrefillWork w) {
  using T = typename Tr::q_t;
  using Variant = typename Tr::Variant;
  using qk_t = typename RopeQKType<T, Variant::kRope>::type;  // rotated bf16 Q and K as f16 (pos_encoding.cuh)
  using Tile = SmemTile<Tr::kHeadDim>;
  using VTile = SmemTile<Tr::kHeadDimVO>;
  constexpr int D = Tr::kHeadDim;
  constexpr int DV = Tr::kHeadDimVO;
  constexpr int FM = Tr::kFragsM;
  constexpr int kTQ = Tr::kTileQ;
  constexpr int kTKV = Tr::kTileKV;
  constexpr int kS = Tr::kStages;
  constexpr int kRopePartner = Tr::kRopePartner;  // the lane holding dims d +- D/2 of the same row

  const int kv_head = w.kv_head;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int slice = tid % Tr::kLanesPerRow, row_in_pass = tid / Tr::kLanesPerRow, dim0 = slice * 8;
  // This CTA's V/O slice starts at dim vo0; the threads whose K slice lies
  // below DV copy V (at 512: warps 0 and 2, each a half row).
  const int vo0 = Tr::kVoParts > 1 ? w.vo_part * DV : 0;
  const bool copies_v = Tr::kVoParts == 1 || dim0 < DV;

  const PackedRows token_head(p, kv_head);  // packed row -> (query token, query head)
  const typename Tr::KVSource kv(p.kv, w.request);
  const PrefillExtent e = prefill_extent<kTQ, kTKV, Tr::kMaskMode, Tr::kWindow>(p, w, kv.length());
  const int qo_begin = e.qo_begin, qo_len = e.qo_len, packed_len = e.packed_len, row0 = e.row0;
  if (row0 >= packed_len) return;  // a batch's padding item: the whole CTA leaves
  const int kv_len = e.kv_len, pos_offset = e.pos_offset, min_q_pos = e.min_q_pos, max_q_pos = e.max_q_pos;
  // The KV tiles this item visits (all of its extent, or a block mask's kept ones).
  constexpr bool kSparse = user_block_sparse();
  using Walk = KVTileWalk<kTKV, kSparse>;
  const Walk walk(p, w.request, w.q_tile, kv_head, e);
  const int kv_end = e.kv_end, num_tiles = walk.count();

  const uint32_t smem = smem_addr(attnjit_prefill_smem);
  const Tile q_tile{smem};
  // Stages by arithmetic, not an array of tiles: a run-time index into an
  // array would put it in local memory.
  auto k_tile = [&](int stage) { return Tile{smem + (kTQ + stage * kTKV) * Tile::kRowBytes}; };
  auto v_tile = [&](int stage) {
    if constexpr (Tr::kVoParts == 1) return VTile{smem + (kTQ + (kS + stage) * kTKV) * Tile::kRowBytes};
    else return VTile{smem + (kTQ + kS * kTKV) * Tile::kRowBytes + stage * kTKV * VTile::kRowBytes};
  };

  prefill_stage_q<Tr::kQPasses, Tr::kRowsPerPass>(p, token_head, row0, packed_len, qo_begin, q_tile, row_in_pass,
                                                  dim0);

  const auto kv_slice = kv.slice(kv_head, dim0);
  // A thread copies kKVPasses consecutive rows of the tile (its slice of
  // each; a pass still covers whole rows, so a warp's loads stay coalesced),
  // walking them from one address: within a page the next row is one stride
  // on, so a paged source looks a page up once per page, not once per row.
  // The run of rows starts at a multiple of kKVPasses: when that divides the
  // page size the run lies in one page, and one lookup serves all of it.
  const bool one_page = kv_slice.runs_in_page(Tr::kKVPasses);
  auto load_rows = [&](int stage, int base, bool with_k, bool with_v) {
    const Tile kt = k_tile(stage);
    const VTile vt = v_tile(stage);
    if (!copies_v) with_v = false;  // warp-uniform
    KVRowAddress at;
#pragma unroll
    for (int s = 0; s < Tr::kKVPasses; ++s) {
      const int r = row_in_pass * Tr::kKVPasses + s, j = base + r;
      const bool valid = j < kv_len;  // rows past the sequence read as zeros (masked, and 0 * V stays finite)
      if (s == 0) at = kv_slice.row(valid ? j : 0);
      else at = one_page ? kv_slice.step(at) : kv_slice.next(at, j - 1, valid);
      if constexpr (storage_bytes<typename Tr::kv_t>::value == 2) {
        if (with_k) cp_async_16(kt.at(r, dim0), at.k, valid);
        if (with_v) cp_async_16(vt.at(r, dim0), at.v + vo0 * 2, valid);
      } else {
        // fp8: through registers, widened to the q dtype for the tensor cores.
        // The stage was freed by the last barrier and is read after the next.
        frag8 kf, vf;
        kf.zero();
        vf.zero();
        if (valid) {
          if (with_k) kf = load8<typename Tr::kv_t>(at.k);
          if (with_v) vf = load8<typename Tr::kv_t>(at.v + vo0);  // 1-byte elements
        }
        if (with_k) store_smem8<T>(kt.at(r, dim0), kf);
        if (with_v) store_smem8<T>(vt.at(r, dim0), vf);
      }
    }
  };
  auto load_kv = [&](int stage, int base) { load_rows(stage, base, true, true); };

  // This thread's rows (g and g + 8 of each of its warp's fragments): their
  // query token (padding rows borrow a real one) and variant (the head's
  // ALiBi slope, the mask row). The query positions are recomputed where a
  // tile needs the mask rather than kept in registers: with 64-key tiles
  // every register counts (ptxas spilled otherwise).
  auto packed_row = [&](int m, int h) { return row0 + warp * Tr::kRowsPerWarp + m * 16 + g + 8 * h; };
  auto token_of = [&](int pr) { return min(int(p.group.div(pr)), qo_len - 1); };
  Variant var[FM][2];
#pragma unroll
  for (int m = 0; m < FM; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) var[m][h] = token_head.variant<Variant>(w.request, packed_row(m, h), kv_len, qo_len);

  // Prologue: Q and the first kS - 1 KV tiles, one commit group per tile (Q
  // with the first); with one stage, Q with K 0, then V 0.
  if constexpr (Tr::kSplitKV) {
    if (num_tiles > 0) load_rows(0, walk.base(0), true, false);
    cp_async_commit();
    if (num_tiles > 0) load_rows(0, walk.base(0), false, true);
    cp_async_commit();
  }
#pragma unroll
  for (int st = 0; st < kS - 1; ++st) {
    if (st < num_tiles) load_kv(st, walk.base(st));
    cp_async_commit();
  }

  RowState rows[FM];
  frag_c o[FM][DV / 8];
#pragma unroll
  for (int m = 0; m < FM; ++m) {
    rows[m].init();
#pragma unroll
    for (int n = 0; n < DV / 8; ++n) o[m][n].zero();
  }

  for (int it = 0; it < num_tiles; ++it) {
    const int base = walk.base(it);
    const int stage = it % kS;
    // The groups committed so far end with tile it + kS - 2: waiting for all
    // but kS - 2 of them lands tile it. The barrier then both publishes it
    // and retires the last iteration, whose stage (the ring's oldest) takes
    // tile `next`: one barrier per tile (there was a second, closing one).
    // The copies go out after Q K^T has read its fragments (below), so
    // those ldmatrix wait behind no queued copies, and the copies' address
    // registers are not needed again right away (ncu: 7% of the stall
    // samples were writes of them waiting behind a burst of 16 copies
    // issued just before the barrier). fp8 K/V comes through registers,
    // scarcest while S is live: it loads before Q K^T.
    //
    // One stage (K and V buffers of their own) instead: K `it` is waited on
    // here and V `it` only before P V, two barriers per tile. Each frees
    // the other buffer: V `it` goes out here (every warp is past P V of
    // it - 1) and lands during Q K^T and the softmax; K `it + 1` goes out
    // after the second barrier (every warp is past Q K^T) and lands during
    // P V. (V 0 went out in the prologue, right behind K 0.)
    const int next = it + kS - 1;
    constexpr bool kAsyncCopies = storage_bytes<typename Tr::kv_t>::value == 2;
    if constexpr (Tr::kSplitKV) {
      if (it == 0) cp_async_wait<1>();
      else cp_async_wait<0>();
      __syncthreads();
      if (it > 0) load_rows(0, base, false, true);
      cp_async_commit();
    } else {
      cp_async_wait<kS - 2>();
      __syncthreads();
      if constexpr (!kAsyncCopies)
        if (next < num_tiles) load_kv(next % kS, walk.base(next));
    }

    const Tile kt = k_tile(stage);
    const VTile vt = v_tile(stage);
    if constexpr (Variant::kRope) {
      // Rotate the staged rows in place: Q once, every K tile as it lands.
      // Each slice is read and written by one thread; its partner's values
      // come by shuffle, so no barrier is needed between the two.
      const int rope0 = Tr::rope_slice(slice) * 8;
      if (it == 0)
        prefill_rotate_staged<Tr::kQPasses, Tr::kRowsPerPass, T, qk_t>(
            q_tile, row_in_pass, rope0, [&](frag8& f, int r) {
              var[0][0].template transform_query<D>(f, pos_offset + token_of(row0 + r), rope0, kRopePartner);
            });
      prefill_rotate_staged<Tr::kKVPasses, Tr::kRowsPerPass, T, qk_t>(kt, row_in_pass, rope0, [&](frag8& f, int r) {
        var[0][0].template transform_key<D>(f, base + r, rope0, kRopePartner);
      });
      __syncthreads();
    }

    // S = Q K^T over the warp's rows and the tile's kTKV keys.
    frag_c s[FM][kTKV / 8];
#pragma unroll
    for (int m = 0; m < FM; ++m)
#pragma unroll
      for (int n = 0; n < kTKV / 8; ++n) s[m][n].zero();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      frag_a qa[FM];
#pragma unroll
      for (int m = 0; m < FM; ++m) qa[m] = q_tile.a_fragment(warp * Tr::kRowsPerWarp + m * 16, ks * 16);
#pragma unroll
      for (int nn = 0; nn < kTKV / 16; ++nn) {
        frag_b lo, hi;
        kt.b_fragments_nk(lo, hi, nn * 16, ks * 16);
        mma_16816_rows<qk_t>(s, nn, qa, lo, hi);
      }
    }

    if constexpr (!Tr::kSplitKV) {
      if constexpr (kAsyncCopies)
        if (next < num_tiles) load_kv(next % kS, walk.base(next));
      cp_async_commit();
    }

    // Logits through the variant; the mask only on tiles it can touch (the
    // tile reaches past the chunk's end, the diagonal, or a window's start).
    // A block mask's full tile keeps every pair: only the edge and the window.
    const bool tile_full = walk.full(it);
    bool need_mask = base + kTKV > kv_end || (Tr::kMaskMode == kernels::kMaskCustom && !tile_full);
    if constexpr (Tr::kMaskMode == kernels::kMaskCausal) need_mask = need_mask || base + kTKV - 1 > min_q_pos;
    if constexpr (Tr::kWindow)
      need_mask = need_mask || (p.var.window_left >= 0 && base < max_q_pos - p.var.window_left);
    const float escale = var[0][0].exponent_scale();  // one sm_scale for every head
    float shrink[FM][2];
#pragma unroll
    for (int m = 0; m < FM; ++m) {
      score_tile(s[m], var[m], base, kv_end, need_mask, kSparse && tile_full,
                 [&](int half) { return pos_offset + token_of(packed_row(m, half)); });
      float tile_max[2];
      row_max(s[m], tile_max);
      rows[m].raise_max(tile_max, shrink[m], escale);
    }
    // The rescales branch (warp-uniform: skipped once the maxima settle);
    // after them the P V loop below is one straight block.
#pragma unroll
    for (int m = 0; m < FM; ++m) rescale(o[m], shrink[m]);
    if constexpr (Tr::kSplitKV) {
      cp_async_wait<0>();  // V `it`
      __syncthreads();
      if (it + 1 < num_tiles) load_rows(0, kSparse ? walk.base(it + 1) : base + kTKV, true, false);
      cp_async_commit();
    }

    // O += P V, 16 keys per k-step; d += rowsum P alongside. Each k-step's
    // P = 2^(S - m) is taken just before its MMAs, so its ex2s overlap the
    // previous k-step's MMAs.
    frag_c sums[FM];
#pragma unroll
    for (int m = 0; m < FM; ++m) sums[m].zero();
#pragma unroll
    for (int kk = 0; kk < kTKV / 16; ++kk) {
      frag_a pa[FM];
#pragma unroll
      for (int m = 0; m < FM; ++m) {
        rows[m].exp2(s[m][2 * kk], escale);
        rows[m].exp2(s[m][2 * kk + 1], escale);
        pa[m] = to_a_fragment<T>(s[m][2 * kk], s[m][2 * kk + 1]);
        row_sums_mma<T>(sums[m], pa[m]);
      }
#pragma unroll
      for (int nd = 0; nd < DV / 16; ++nd) {
        frag_b lo, hi;
        vt.b_fragments_kn(lo, hi, kk * 16, nd * 16);
        mma_16816_rows<T>(o, nd, pa, lo, hi);
      }
    }
#pragma unroll
    for (int m = 0; m < FM; ++m) rows[m].add_row_sums(sums[m]);
  }
  cp_async_wait<0>();  // empty groups, or Q when no tile ran: nothing may land in the staging below
  kv_slice.report_bad_pages(kv_len);  // cold: only where a page id was bad
  __syncthreads();

  // Epilogue (PrefillOutput): unsplit rows go through the warp's own Q rows
  // (only this warp read them) so the global stores are 16 bytes wide.
  const PrefillOutput<DV, typename Tr::o_t, Tile, D> out{
      p, token_head, row0, packed_len, qo_begin, w.chunk, p.num_chunks > 1, q_tile, vo0};
#pragma unroll
  for (int m = 0; m < FM; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      out.row(o[m], h, warp * Tr::kRowsPerWarp + m * 16 + g + 8 * h, t, rows[m].m[h], rows[m].d[h]);
  out.template flush<Tr::kRowsPerWarp>(warp * Tr::kRowsPerWarp, lane);
}

// The CTA's items (prefill_schedule.cuh), each one tile of this skeleton.
template <class Tr>
ATTNJIT_DEVICE void prefill(const kernels::PrefillParams& p) {
  prefill_items<Tr::kVoParts>(p, [&](const PrefillWork& w) { prefill_tile<Tr>(p, w); });
}

}  // namespace attnjit

// Prefill / append attention on Hopper's warpgroup MMA (wgmma, sm_90a): the
// same work, variant hooks, KV sources and partial states as the mma.sync
// skeleton (prefill.cuh), with the products issued by warpgroups and read
// straight from shared memory.
//
// Each warpgroup owns 64 of the CTA's query rows (packed with the KV head's
// group as in prefill.cuh): two of them (128 rows) by default, one where
// 128-row tiles would leave most SMs idle. Per KV tile of kTileKV rows:
//
//   S = Q K^T          wgmma m64 x kTileKV x 16 per 16 dims, Q and K from
//                      shared memory (K-major descriptors), f32 accumulators
//   S -> scores        variant.score; masked entries -inf (tiles that need it)
//   online softmax     fragment_softmax.cuh on the accumulators as they lie
//                      (the wgmma accumulator layout is mma.sync's, per warp)
//   O += P V           wgmma with P from registers (mma.sync's A fragments)
//                      and V from shared memory (N-major descriptor)
//
// K and V tiles stream through a kStages-deep cp.async ring, every thread
// copying; the next tile's copies are issued while Q K^T runs on the tensor
// cores. Tiles sit in 128-byte swizzled blocks (swizzled_tile.cuh), the only
// layout the descriptors read without bank conflicts. Row sums are kept per
// thread in f32 and added across the quad once, at the end.
#pragma once
#include "cp_async.cuh"
#include "fragment_softmax.cuh"
#include "kv_source.cuh"
#include "kv_tile_walk.cuh"
#include "numeric.cuh"
#include "prefill_params.h"
#include "prefill_schedule.cuh"
#include "swizzled_tile.cuh"
#include "tile_scores.cuh"
#include "variant.cuh"
#include "wgmma.cuh"

namespace attnjit {

template <int HeadDim, class QT, class KVT, class OT, int PosMode, bool SoftCap, int MaskMode, bool Window,
          template <class> class KVSourceT, int WarpGroups, int Stages, int CtasPerSm>
struct PrefillSm90Traits {
  static_assert(WarpGroups == 1 || WarpGroups == 2, "one or two warpgroups of 64 query rows");
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "prefill supports head_dim 64, 128, 256");
  static_assert(Stages >= 2 && Stages <= 4, "2 to 4 pipeline stages");
  static_assert(storage_bytes<QT>::value == 2 && storage_bytes<KVT>::value == 2,
                "16-bit q and K/V (the tensor cores' input type; fp8 K/V takes the mma.sync skeleton)");
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kWarpGroups = WarpGroups;
  static constexpr int kThreads = kWarpGroups * 128;
  static constexpr int kRowsPerGroup = 64;
  static constexpr int kTileQ = kernels::prefill_sm90_tile_q(WarpGroups);
  static constexpr int kTileKV = kernels::prefill_sm90_tile_kv(HeadDim, CtasPerSm);
  static constexpr int kCtasPerSm = CtasPerSm;
  static constexpr int kStages = Stages;
  static constexpr int kLanesPerRow = HeadDim / 8;  // a thread copies one 16-byte slice of a row
  static constexpr int kRowsPerPass = kThreads / kLanesPerRow;
  static constexpr int kQPasses = kTileQ / kRowsPerPass;
  static constexpr int kKVPasses = kTileKV / kRowsPerPass;
  static constexpr int kMaskMode = MaskMode;
  static constexpr bool kWindow = Window;
  using q_t = QT;
  using kv_t = KVT;
  using o_t = OT;
  using KVSource = KVSourceT<KVT>;
  using Variant = AttentionVariant<PosMode, SoftCap, MaskMode, Window>;
  static_assert(kTileQ == kWarpGroups * kRowsPerGroup, "each warpgroup owns 64 query rows");
};

template <class Tr>
ATTNJIT_DEVICE void prefill_sm90_tile(const kernels::PrefillParams& p, const PrefillWork w) {
  using T = typename Tr::q_t;
  using Variant = typename Tr::Variant;
  using qk_t = typename RopeQKType<T, Variant::kRope>::type;  // rotated bf16 Q and K as f16 (pos_encoding.cuh)
  constexpr int D = Tr::kHeadDim;
  constexpr int kTQ = Tr::kTileQ;
  constexpr int kTKV = Tr::kTileKV;
  constexpr int kS = Tr::kStages;
  constexpr int kRopePartner = Tr::kLanesPerRow / 2;  // the lane holding dims d +- D/2 of the same row
  using QTile = SwizzledTile<D, kTQ>;
  using KVTile = SwizzledTile<D, kTKV>;

  const int kv_head = w.kv_head;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int group_row0 = (warp >> 2) * Tr::kRowsPerGroup;  // the warpgroup's first row of the tile
  const int warp_row0 = group_row0 + (warp & 3) * 16;      // the warp's 16 rows of it
  const int slice = tid % Tr::kLanesPerRow, row_in_pass = tid / Tr::kLanesPerRow, dim0 = slice * 8;

  const PackedRows token_head(p, kv_head);  // packed row -> (query token, query head)
  const typename Tr::KVSource kv(p.kv, w.request);
  const PrefillExtent e = prefill_extent<kTQ, kTKV, Tr::kMaskMode, Tr::kWindow>(p, w, kv.length());
  if (e.row0 >= e.packed_len) return;  // a batch's padding item: the whole CTA leaves
  // The KV tiles this item visits (all of its extent, or a block mask's kept ones).
  constexpr bool kSparse = user_block_sparse();
  using Walk = KVTileWalk<kTKV, kSparse>;
  const Walk walk(p, w.request, w.q_tile, kv_head, e);
  const int num_tiles = walk.count();

  const uint32_t smem = (smem_addr(attnjit_prefill_smem) + 1023u) & ~1023u;
  const QTile q_tile{smem};
  auto k_tile = [&](int stage) { return KVTile{smem + QTile::kBytes + stage * KVTile::kBytes}; };
  auto v_tile = [&](int stage) { return KVTile{smem + QTile::kBytes + (kS + stage) * KVTile::kBytes}; };

  prefill_stage_q<Tr::kQPasses, Tr::kRowsPerPass>(p, token_head, e.row0, e.packed_len, e.qo_begin, q_tile,
                                                  row_in_pass, dim0);

  // K/V rows as in prefill.cuh: kKVPasses consecutive rows per thread from
  // one running address (one page lookup per page).
  const auto kv_slice = kv.slice(kv_head, dim0);
  const bool one_page = kv_slice.runs_in_page(Tr::kKVPasses);
  auto load_kv = [&](int stage, int base) {
    const KVTile kt = k_tile(stage), vt = v_tile(stage);
    KVRowAddress at;
#pragma unroll
    for (int s = 0; s < Tr::kKVPasses; ++s) {
      const int r = row_in_pass * Tr::kKVPasses + s, j = base + r;
      const bool valid = j < e.kv_len;  // rows past the sequence read as zeros (masked, and 0 * V stays finite)
      if (s == 0) at = kv_slice.row(valid ? j : 0);
      else at = one_page ? kv_slice.step(at) : kv_slice.next(at, j - 1, valid);
      cp_async_16(kt.at(r, dim0), at.k, valid);
      cp_async_16(vt.at(r, dim0), at.v, valid);
    }
  };

  // This thread's two rows (g and g + 8 of its warp's 16): query token
  // (padding rows borrow a real one) and variant.
  auto packed_row = [&](int h) { return e.row0 + warp_row0 + g + 8 * h; };
  auto token_of = [&](int pr) { return min(int(p.group.div(pr)), e.qo_len - 1); };
  Variant var[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) var[h] = token_head.variant<Variant>(w.request, packed_row(h), e.kv_len, e.qo_len);

  // Prologue: Q and the first kS - 1 KV tiles, one commit group per tile (Q with the first).
#pragma unroll
  for (int st = 0; st < kS - 1; ++st) {
    if (st < num_tiles) load_kv(st, walk.base(st));
    cp_async_commit();
  }

  RowState rows;
  rows.init();
  frag_c o[D / 8];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n].zero();

  for (int it = 0; it < num_tiles; ++it) {
    const int base = walk.base(it);
    const int stage = it % kS;
    // Tile `it` has landed once all but the kS - 2 newest groups have; the
    // barrier publishes it and retires the last iteration (every warpgroup
    // is past its P V), whose stage takes tile `next`.
    cp_async_wait<kS - 2>();
    fence_proxy_async_shared();  // this thread's landed copies, before the tensor cores read them
    __syncthreads();
    const KVTile kt = k_tile(stage), vt = v_tile(stage);
    if constexpr (Variant::kRope) {
      // Rotate the staged rows in place: Q once, every K tile as it lands.
      if (it == 0)
        prefill_rotate_staged<Tr::kQPasses, Tr::kRowsPerPass, T, qk_t>(q_tile, row_in_pass, dim0, [&](frag8& f, int r) {
          var[0].template transform_query<D>(f, e.pos_offset + token_of(e.row0 + r), dim0, kRopePartner);
        });
      prefill_rotate_staged<Tr::kKVPasses, Tr::kRowsPerPass, T, qk_t>(kt, row_in_pass, dim0, [&](frag8& f, int r) {
        var[0].template transform_key<D>(f, base + r, dim0, kRopePartner);
      });
      fence_proxy_async_shared();
      __syncthreads();
    }

    // S = Q K^T for the warpgroup's 64 rows, issued; the next tile's copies
    // go out while it runs.
    frag_c s[kTKV / 8];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
      Wgmma<qk_t, kTKV>::ss(s, q_tile.k_major(group_row0, ks * 16), kt.k_major(0, ks * 16), ks > 0);
    wgmma_commit();
    const int next = it + kS - 1;
    if (next < num_tiles) load_kv(next % kS, walk.base(next));
    cp_async_commit();
    wgmma_wait<0>();
    wgmma_hold(s);

    // Logits through the variant; the mask only on tiles it can touch (a
    // block mask's full tile: only the edge and the window).
    const bool tile_full = walk.full(it);
    bool need_mask = base + kTKV > e.kv_end || (Tr::kMaskMode == kernels::kMaskCustom && !tile_full);
    if constexpr (Tr::kMaskMode == kernels::kMaskCausal) need_mask = need_mask || base + kTKV - 1 > e.min_q_pos;
    if constexpr (Tr::kWindow)
      need_mask = need_mask || (p.var.window_left >= 0 && base < e.max_q_pos - p.var.window_left);
    const float escale = var[0].exponent_scale();  // one sm_scale for every head
    score_tile(s, var, base, e.kv_end, need_mask, kSparse && tile_full,
               [&](int half) { return e.pos_offset + token_of(packed_row(half)); });
    float tile_max[2], shrink[2];
    row_max(s, tile_max);
    rows.raise_max(tile_max, shrink, escale);
    rescale(o, shrink);
    rows.exp2_and_sum(s, escale);  // this thread's columns; the quad adds up at the end

    // O += P V: P from the S accumulators as A fragments, 16 keys a product.
    frag_a pa[kTKV / 16];
#pragma unroll
    for (int kk = 0; kk < kTKV / 16; ++kk) pa[kk] = to_a_fragment<T>(s[2 * kk], s[2 * kk + 1]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kTKV / 16; ++kk) Wgmma<T, D>::rs(o, pa[kk], vt.mn_major(kk * 16), true);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(o);
  }
  rows.finalize();
  cp_async_wait<0>();  // empty groups, or Q when no tile ran: nothing may land in the staging below
  kv_slice.report_bad_pages(e.kv_len);  // cold: only where a page id was bad
  __syncthreads();

  // Epilogue (PrefillOutput): unsplit rows go through the warp's own Q rows,
  // which no product reads any more.
  const PrefillOutput<D, typename Tr::o_t, QTile> out{p, token_head, e.row0, e.packed_len, e.qo_begin, w.chunk,
                                                       p.num_chunks > 1, q_tile};
#pragma unroll
  for (int h = 0; h < 2; ++h) out.row(o, h, warp_row0 + g + 8 * h, t, rows.m[h], rows.d[h]);
  out.template flush<16>(warp_row0, lane);
}

template <class Tr>
ATTNJIT_DEVICE void prefill_sm90(const kernels::PrefillParams& p) {
  prefill_items(p, [&](const PrefillWork& w) { prefill_sm90_tile<Tr>(p, w); });
}

}  // namespace attnjit

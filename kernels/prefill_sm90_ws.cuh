// Prefill / append attention on Hopper, warp-specialized (FlashAttention-3's
// plan): the same work items, variant hooks, KV sources and outputs as the
// other prefill skeletons (prefill_schedule.cuh), with the CTA split by role.
//
//   producer warpgroup   K and V tiles into a kStages ring: one thread
//   (registers given     issuing TMA copies (contiguous, ragged: kv_tma.cuh),
//    back)               or all 128 gathering rows by cp.async (paged), each
//                        tile announced on its stage's full barrier
//   consumer warpgroups  64 query rows each (Q staged by cp.async, packed
//   (registers taken)    with the KV head's group); per KV tile j:
//
//      S_j = Q K_j^T              wgmma from shared memory, issued,
//      O  += P_{j-1} V_{j-1}      then this one behind it, before S_j's softmax:
//      softmax(S_j) -> P_j        runs while P_{j-1} V_{j-1} is on the tensor cores
//      O  *= 2^(m_{j-1} - m_j)    once that product has retired
//
// Each stage's K and V are released (empty barriers) as soon as the product
// that read them retires. The two consumer warpgroups take turns issuing
// their products (named barriers, one turn per GEMM batch), so one's softmax
// overlaps the other's GEMMs. Output goes through the warpgroup's own Q rows
// in shared memory and out in 16-byte stores (PrefillOutput). RoPE: the
// consumers rotate their staged Q rows once; the producer gathers K (any
// source) and rotates each K tile in shared memory before announcing it,
// so the consumers' loop is the same for every variant.
//
// fp8 (q, K and V e4m3; 128-wide heads, TMA sources): both products on fp8
// wgmma, which reads B K-major only, so V lands by TMA in a landing tile
// and the producer's 128 threads transpose it into the V tile (dims x
// keys), keys in the order in which P's accumulators pack into A fragments
// inside each thread (to_a_fragment_e4m3). Scores carry each row's
// sq[head] sk[kv head] in the exponent scale, the output sv[kv head].
//
// Persistent (a template switch; the planner launches one CTA per SM): the
// CTA takes its items in rounds, with no CTA-wide barrier between them, so
// the producer runs ahead into the next item's K and V while the consumers
// finish this one, and where a second Q tile fits the consumers stage the
// next item's Q rows during this one. CUDA-graph mode keeps its counter.
#pragma once
#include "cp_async.cuh"
#include "fragment_softmax.cuh"
#include "kv_tile_walk.cuh"
#include "kv_source.cuh"
#include "kv_tma.cuh"
#include "mbarrier.cuh"
#include "named_barrier.cuh"
#include "numeric.cuh"
#include "prefill_schedule.cuh"
#include "prefill_ws_params.h"
#include "swizzled_tile.cuh"
#include "tile_scores.cuh"
#include "tma.cuh"
#include "variant.cuh"
#include "wgmma.cuh"

namespace attnjit {

template <int HeadDim, class QT, class KVT, class OT, int PosMode, bool SoftCap, int MaskMode, bool Window,
          template <class> class KVSourceT, int Stages, bool Persistent = false>
struct PrefillWsTraits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "prefill supports head_dim 64, 128, 256");
  static_assert(Stages >= 2 && Stages <= 4, "2 to 4 pipeline stages");
  static_assert(PosMode != kernels::kPosRopeLlama || HeadDim <= 128, "RoPE up to 128-wide heads (the planner refuses 256)");
  static constexpr bool kFp8 = storage_bytes<QT>::value == 1;
  static_assert(kFp8 ? (is_same_type<QT, e4m3>::value && is_same_type<KVT, e4m3>::value)
                     : (storage_bytes<QT>::value == 2 && storage_bytes<KVT>::value == 2),
                "16-bit q and K/V, or e4m3 q, K and V");
  static_assert(!kFp8 || (HeadDim == 128 && PosMode == kernels::kPosNone && !SoftCap),
                "fp8: 128-wide heads, no positional encoding or soft cap (the planner refuses the rest)");
  static_assert(storage_bytes<OT>::value == 2, "a 16-bit output");
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kElemBytes = kFp8 ? 1 : 2;
  // A row of Q or K in the tiles' 16-bit columns (swizzled_tile.cuh).
  static constexpr int kRowCols = HeadDim * kElemBytes / 2;
  static constexpr int kThreads = kernels::prefill_ws_threads();
  static constexpr int kRowsPerGroup = 64;
  static constexpr int kTileQ = kernels::prefill_ws_tile_q();
  using KVSource = KVSourceT<KVT>;
  static constexpr bool kTma = kernels::prefill_ws_tma(KVTma<KVSource>::kTma, PosMode);
  static_assert(!kFp8 || kTma, "fp8 from TMA sources (contiguous, ragged; the planner refuses paged)");
  static constexpr int kTileKV = kernels::prefill_ws_tile_kv(HeadDim, MaskMode, Window, SoftCap, PosMode, kTma, kFp8);
  static constexpr int kStages = Stages;
  static constexpr bool kPersistent = Persistent;
  static constexpr int kQBuffers = kernels::prefill_ws_q_buffers(HeadDim, kTileKV, Stages, Persistent, kFp8);
  static constexpr int kLanesPerRow = kRowCols / 8;  // a thread copies one 16-byte slice of a row
  static constexpr int kRowsPerPass = 128 / kLanesPerRow;  // a warpgroup's rows per copy pass
  static constexpr int kQPasses = kRowsPerGroup / kRowsPerPass;
  static constexpr int kKVPasses = kTileKV / kRowsPerPass;
  static constexpr int kRopePartner = kLanesPerRow / 2;  // the lane holding dims d +- D/2 of the same row
  static constexpr int kMaskMode = MaskMode;
  static constexpr bool kWindow = Window;
  using q_t = QT;
  using kv_t = KVT;
  using o_t = OT;
  using Variant = AttentionVariant<PosMode, SoftCap, MaskMode, Window>;
  using qk_t = typename RopeQKType<QT, Variant::kRope>::type;  // f16 for rotated bf16 (pos_encoding.cuh)
  // Producer / consumer registers: TMA 24 / 240, gather 40 / 232, RoPE 72 /
  // 216 (up to 128-wide heads: at 256 every split spilled; refused there).
  static constexpr int kProducerRegs = kernels::prefill_ws_producer_regs(kTma, PosMode, kFp8);
  // P as A fragments: 16 keys each (16-bit), or 32 (fp8).
  static constexpr int kKeysPerStep = kFp8 ? 32 : 16;
  // setmaxnreg moves registers within the CTA's allocation (384 x 168, the
  // most __launch_bounds__ gives 384 threads): consumers get what the producer frees.
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kConsumerRegs = (3 * kLaunchRegs - kProducerRegs) / 2 / 8 * 8;
};

// Named barriers (0 is __syncthreads): a consumer warpgroup's Q landed;
// a consumer warpgroup's turn on the tensor cores; the whole CTA between
// items (CUDA-graph mode, and one item a CTA); a persistent consumer
// warpgroup's one Q tile flushed, before the next item's rows land in it;
// the fp8 producer's threads done with a landing tile.
constexpr int kBarQReady = 1, kBarTurn = 3, kBarItem = 5, kBarQFree = 6, kBarLanded = 8;

// Where things are in shared memory: each consumer's Q rows (kQBuffers
// tiles each, of the 16-bit output's size: they stage it), the ring's K
// and V tiles (fp8: V transposed, and V's landing tiles), and per stage
// four barriers (K full, V full, K empty, V empty; fp8: V landed).
template <class Tr>
struct WsSmem {
  using QTile = SwizzledTile<Tr::kRowCols, Tr::kRowsPerGroup>;
  using OTile = SwizzledTile<Tr::kHeadDim, Tr::kRowsPerGroup>;  // the same rows, staging the output
  using KVTile = SwizzledTile<Tr::kRowCols, Tr::kTileKV>;
  // fp8's V tile: a row per dim, the tile's keys along it (the B operand
  // K-major); as many bytes as a K tile.
  using VTile = typename conditional_type<Tr::kFp8, SwizzledTile<Tr::kTileKV / 2, Tr::kHeadDim>, KVTile>::type;
  static_assert(VTile::kBytes == KVTile::kBytes, "V tiles the size of K tiles");
  static constexpr int kS = Tr::kStages;
  static constexpr int kTilesPerStage = Tr::kFp8 ? 3 : 2;
  static constexpr uint32_t kQBytes = 2 * Tr::kQBuffers * OTile::kBytes;
  uint32_t base;  // 1024-byte aligned
  ATTNJIT_DEVICE QTile q(int group, int buffer = 0) const { return {base + (2 * buffer + group) * OTile::kBytes}; }
  ATTNJIT_DEVICE OTile out(int group, int buffer = 0) const { return {q(group, buffer).base}; }
  ATTNJIT_DEVICE KVTile k(int stage) const { return {base + kQBytes + stage * KVTile::kBytes}; }
  ATTNJIT_DEVICE VTile v(int stage) const { return {base + kQBytes + (kS + stage) * KVTile::kBytes}; }
  ATTNJIT_DEVICE KVTile v_landing(int stage) const { return {base + kQBytes + (2 * kS + stage) * KVTile::kBytes}; }
  ATTNJIT_DEVICE MBarrier barrier(int kind, int stage) const {
    return {base + kQBytes + kTilesPerStage * kS * KVTile::kBytes + (kind * kS + stage) * 8};
  }
  ATTNJIT_DEVICE MBarrier full_k(int stage) const { return barrier(0, stage); }
  ATTNJIT_DEVICE MBarrier full_v(int stage) const { return barrier(1, stage); }
  ATTNJIT_DEVICE MBarrier empty_k(int stage) const { return barrier(2, stage); }
  ATTNJIT_DEVICE MBarrier empty_v(int stage) const { return barrier(3, stage); }
  ATTNJIT_DEVICE MBarrier landed_v(int stage) const { return barrier(4, stage); }
};

// Use n of the ring (tiles counted from the kernel's start): its stage and
// the parity of the phase that announces it.
template <int S>
struct RingSlot {
  int stage;
  uint32_t parity;
  ATTNJIT_DEVICE explicit RingSlot(uint32_t n) : stage(int(n % S)), parity((n / S) & 1u) {}
};

// RoPE on the producer's rows r0 .. r0 + kKVPasses - 1 of a K tile (at
// positions pos0 on, one step apart: a rotation walk), elements Lo .. Lo + 3
// of its 8-wide slice from dim0, once its copies have landed, written back
// as qk_t. The partner dims are another lane's, exchanged by shuffles, so
// each thread rewrites only what it copied. Two walks of 4 dims, one after
// the other: a walk of all 8 holds 32 floats, more than the producer's
// registers. Each writes only its 4 elements (the second walk reads the
// other 4 still in kv_t).
template <class Tr, int Lo, class Tile>
ATTNJIT_DEVICE void prefill_ws_rotate_keys(const Tile& tile, int r0, int pos0, int dim0,
                                           const typename Tr::Variant& var) {
  using qk_t = typename Tr::qk_t;
  auto walk = var.template key_rotation<Tr::kHeadDim, 4>(pos0, 1, dim0 + Lo);
#pragma unroll 1  // unrolled, ptxas loads rows ahead into registers the producer lacks
  for (int s = 0; s < Tr::kKVPasses; ++s) {
    frag8 f = load_smem8<typename Tr::kv_t>(tile.at(r0 + s, dim0));
    walk.template rotate_and_step<Lo>(f, Tr::kRopePartner);
    st_shared_u32(tile.at(r0 + s, dim0 + Lo), pack2<qk_t>(f.x[Lo], f.x[Lo + 1]));
    st_shared_u32(tile.at(r0 + s, dim0 + Lo + 2), pack2<qk_t>(f.x[Lo + 2], f.x[Lo + 3]));
  }
}

// The KV tiles an item visits, the same walk for the producer and the consumers.
template <class Tr>
using WsWalk = KVTileWalk<Tr::kTileKV>;

// fp8: a landed V tile (keys x dims, as TMA wrote it) into the V tile
// (dims x keys), each 32-key chunk's keys in to_a_fragment_e4m3's order:
// slot 4u + i of the chunk holds key 16 (u / 4) + 2 (u % 4) + (i & 1) + 8 (i / 2).
// Thread by thread a 4 x 4 block of bytes: four keys' words (4 dims each)
// in, byte permutes, four dims' words (4 slots each) out. Warp w takes the
// chunk w, lane (u, a) dims 16 j + 4 a for j = 0 .. 7 (two-way bank
// conflicts at most on either side).
//
// The addresses are worked out once (the producer issues beside the
// consumers, so every instruction here is one they wait for): in both
// 1024-byte-aligned tiles a row's 16-byte chunk c sits at chunk c ^ (row % 8),
// on address bits 4..6 alone. A source key's dims 16 j + 4 a are then its
// j = 0 address XOR 16 j, and key + 8 is 1024 bytes on (the same swizzle);
// a destination dim d + 16 j is 2048 bytes past dim d (whole swizzle atoms).
template <class Tr>
ATTNJIT_DEVICE void prefill_ws_transpose_v(const typename WsSmem<Tr>::KVTile& src,
                                           const typename WsSmem<Tr>::VTile& dst, int tid) {
  static_assert(Tr::kTileKV == 128 && Tr::kHeadDim == 128, "four warps, a 32-key chunk each, 128 dims");
  const int warp = tid >> 5, lane = tid & 31, u = lane >> 2, a = lane & 3;
  const int key0 = 32 * warp + 16 * (u >> 2) + 2 * (u & 3), slot0 = 32 * warp + 4 * u;
  const uint32_t from0 = src.at_byte(key0, 4 * a), from1 = src.at_byte(key0 + 1, 4 * a);  // keys key0 (+ 8), key0 + 1 (+ 9)
  uint32_t to[4];  // dims 4 a + i, j = 0
#pragma unroll
  for (int i = 0; i < 4; ++i) to[i] = dst.at_byte(4 * a + i, slot0);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    uint32_t w[4][4];  // four j's loaded before any is stored: the loads overlap
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const uint32_t chunk = uint32_t(4 * half + jj) << 4;
      w[jj][0] = ld_shared_u32(from0 ^ chunk);
      w[jj][1] = ld_shared_u32(from1 ^ chunk);
      w[jj][2] = ld_shared_u32((from0 ^ chunk) + 1024);
      w[jj][3] = ld_shared_u32((from1 ^ chunk) + 1024);
    }
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const uint32_t step = uint32_t(4 * half + jj) * 2048;
      const uint32_t lo01 = detail::byte_perm(w[jj][0], w[jj][1], 0x5140), lo23 = detail::byte_perm(w[jj][2], w[jj][3], 0x5140);
      const uint32_t hi01 = detail::byte_perm(w[jj][0], w[jj][1], 0x7362), hi23 = detail::byte_perm(w[jj][2], w[jj][3], 0x7362);
      st_shared_u32(to[0] + step, detail::byte_perm(lo01, lo23, 0x5410));  // dim d0
      st_shared_u32(to[1] + step, detail::byte_perm(lo01, lo23, 0x7632));  // d0 + 1
      st_shared_u32(to[2] + step, detail::byte_perm(hi01, hi23, 0x5410));  // d0 + 2
      st_shared_u32(to[3] + step, detail::byte_perm(hi01, hi23, 0x7632));  // d0 + 3
    }
  }
}

// fp8's producer, all 128 threads: the first issues K_it and, one tile
// ahead, V_{it+1} into its landing tile; then every thread waits for V_it
// to land and its V tile to be free, transposes its share, and announces
// it (full_v counts 128 arrivals). The landing tile of V_it is refilled
// (with V_{it+2}) only after the barrier that ends the transposition.
template <class Tr>
ATTNJIT_DEVICE void prefill_ws_produce_fp8(const kernels::PrefillWsParams& P, const PrefillWork& w,
                                           const WsWalk<Tr>& walk, const typename Tr::KVSource& kv,
                                           const WsSmem<Tr>& sm, uint32_t ring) {
  using Slot = RingSlot<Tr::kStages>;
  using KVTile = typename WsSmem<Tr>::KVTile;
  const int tid = threadIdx.x;
  const int row0 = KVTma<typename Tr::KVSource>::first_row(kv);
  auto load_v = [&](int it) {
    const Slot slot(ring + it);
    const MBarrier landed = sm.landed_v(slot.stage);
    landed.arrive_expect_tx(KVTile::kBytes);
    tma_load_3d(sm.v_landing(slot.stage).base, P.v_map, landed.addr, 0, w.kv_head, row0 + walk.base(it));
  };
  if (tid == 0 && walk.count() > 0) load_v(0);
  for (int it = 0; it < walk.count(); ++it) {
    const Slot slot(ring + it);
    if (tid == 0) {
      const MBarrier fk = sm.full_k(slot.stage);
      sm.empty_k(slot.stage).wait(slot.parity ^ 1u);
      fk.arrive_expect_tx(KVTile::kBytes);
      tma_load_3d(sm.k(slot.stage).base, P.k_map, fk.addr, 0, w.kv_head, row0 + walk.base(it));
      if (it + 1 < walk.count()) load_v(it + 1);
    }
    sm.empty_v(slot.stage).wait(slot.parity ^ 1u);
    sm.landed_v(slot.stage).wait(slot.parity);
    prefill_ws_transpose_v<Tr>(sm.v_landing(slot.stage), sm.v(slot.stage), tid);
    fence_proxy_async_shared();
    sm.full_v(slot.stage).arrive();
    named_barrier_sync(kBarLanded, 128);
  }
}

// The producer's part of one item: the walk's KV tiles into the ring from use `ring` on.
template <class Tr>
ATTNJIT_DEVICE void prefill_ws_produce(const kernels::PrefillWsParams& P, const PrefillWork& w,
                                       const PrefillExtent& e, const WsWalk<Tr>& walk,
                                       const typename Tr::KVSource& kv, const WsSmem<Tr>& sm, uint32_t ring) {
  using Slot = RingSlot<Tr::kStages>;
  using KVTile = typename WsSmem<Tr>::KVTile;
  if constexpr (Tr::kFp8) {
    prefill_ws_produce_fp8<Tr>(P, w, walk, kv, sm, ring);
  } else if constexpr (Tr::kTma) {
    if (threadIdx.x != 0) return;
    const int row0 = KVTma<typename Tr::KVSource>::first_row(kv);
    for (int it = 0; it < walk.count(); ++it) {
      const Slot slot(ring + it);
      const int row = row0 + walk.base(it);  // rows past the tensor land as zeros
      const MBarrier fk = sm.full_k(slot.stage), fv = sm.full_v(slot.stage);
      sm.empty_k(slot.stage).wait(slot.parity ^ 1u);
      fk.arrive_expect_tx(KVTile::kBytes);
#pragma unroll
      for (int b = 0; b < Tr::kHeadDim / 64; ++b)
        tma_load_3d(sm.k(slot.stage).base + b * KVTile::kBlockBytes, P.k_map, fk.addr, b * 64, w.kv_head, row);
      sm.empty_v(slot.stage).wait(slot.parity ^ 1u);
      fv.arrive_expect_tx(KVTile::kBytes);
#pragma unroll
      for (int b = 0; b < Tr::kHeadDim / 64; ++b)
        tma_load_3d(sm.v(slot.stage).base + b * KVTile::kBlockBytes, P.v_map, fv.addr, b * 64, w.kv_head, row);
    }
  } else {
    // Gather: kKVPasses consecutive rows per thread from one running address
    // (one page lookup per page), as prefill_sm90.cuh. K and V go in
    // separate commit groups, K_j, V_j, K_{j+1}, ...: each is announced once
    // this thread's copies of it have landed (behind the proxy fence the
    // tensor cores need), V_{j-1} before waiting for V_j's stage, which the
    // consumers free only after a product that needs K_j (announced).
    const int tid = threadIdx.x;
    const int dim0 = (tid % Tr::kLanesPerRow) * 8, row_in_pass = tid / Tr::kLanesPerRow;
    const auto kv_slice = kv.slice(w.kv_head, dim0);
    const bool one_page = kv_slice.runs_in_page(Tr::kKVPasses);
    // A thread's rows within one page (the usual page sizes): one lookup and
    // strides, unrolled; else a row at a time, each looked up (kept rolled:
    // unrolled, its lookups took more registers than the producer keeps).
    auto gather = [&](const KVTile& tile, int base, bool keys) {
      const int r0 = row_in_pass * Tr::kKVPasses;
      if (one_page) {
        KVRowAddress at = kv_slice.row(base + r0 < e.kv_len ? base + r0 : 0);
#pragma unroll
        for (int s = 0; s < Tr::kKVPasses; ++s) {
          const bool valid = base + r0 + s < e.kv_len;  // rows past the sequence read as zeros
          cp_async_16(tile.at(r0 + s, dim0), keys ? at.k : at.v, valid);
          at = kv_slice.step(at);
        }
      } else {
#pragma unroll 1
        for (int s = 0; s < Tr::kKVPasses; ++s) {
          const int j = base + r0 + s;
          const bool valid = j < e.kv_len;
          const KVRowAddress at = kv_slice.row(valid ? j : 0);
          cp_async_16(tile.at(r0 + s, dim0), keys ? at.k : at.v, valid);
        }
      }
      cp_async_commit();
    };
    auto announce = [&](const MBarrier& full) {
      cp_async_wait<1>();
      fence_proxy_async_shared();
      full.arrive();
    };
    using Variant = typename Tr::Variant;
    auto rotate_k = [&](const KVTile& tile, int base, const Variant& var) {
      const int r0 = row_in_pass * Tr::kKVPasses;
      prefill_ws_rotate_keys<Tr, 0>(tile, r0, base + r0, dim0, var);
      prefill_ws_rotate_keys<Tr, 4>(tile, r0, base + r0, dim0, var);
    };
    const Variant rope(P.p.var, w.request, 0, P.p.num_qo_heads, e.kv_len, e.qo_len);  // the key hooks only
    for (int it = 0; it < walk.count(); ++it) {
      const Slot slot(ring + it);
      const int base = walk.base(it);
      sm.empty_k(slot.stage).wait(slot.parity ^ 1u);
      gather(sm.k(slot.stage), base, true);
      if (it > 0) announce(sm.full_v(Slot(ring + it - 1).stage));
      sm.empty_v(slot.stage).wait(slot.parity ^ 1u);
      gather(sm.v(slot.stage), base, false);
      if constexpr (Variant::kRope) {
        cp_async_wait<1>();  // K_it landed (V_it may not have)
        rotate_k(sm.k(slot.stage), base, rope);
        fence_proxy_async_shared();
        sm.full_k(slot.stage).arrive();
      } else {
        announce(sm.full_k(slot.stage));
      }
    }
    if (walk.count() > 0) {
      cp_async_wait<0>();
      fence_proxy_async_shared();
      sm.full_v(Slot(ring + walk.count() - 1).stage).arrive();
    }
    kv_slice.report_bad_pages(e.kv_len);  // cold: only where a page id was bad
  }
}

// A consumer warpgroup's Q tiles across its items: the items it has run
// (with two tiles, item n's rows are in tile n % 2) and whether the current
// item's rows were staged during the last one.
struct WsQueryRows {
  uint32_t items = 0;
  bool staged = false;
};

// A consumer warpgroup's part of one item: its 64 query rows against every
// KV tile, then its output rows. A persistent CTA with two Q tiles passes
// the next item (has_next), whose rows it stages once this item's have landed.
template <class Tr>
ATTNJIT_DEVICE void prefill_ws_consume(const kernels::PrefillParams& p, const PrefillWork& w, const PrefillExtent& e,
                                       const WsWalk<Tr>& walk, const WsSmem<Tr>& sm, uint32_t ring, int group,
                                       WsQueryRows& rows_in, const PrefillWork& next, bool has_next) {
  using T = typename Tr::q_t;
  using Variant = typename Tr::Variant;
  using Slot = RingSlot<Tr::kStages>;
  using KVTile = typename WsSmem<Tr>::KVTile;
  constexpr int D = Tr::kHeadDim;
  constexpr int kTKV = Tr::kTileKV;
  const int gtid = threadIdx.x & 127, lane = gtid & 31, warp = gtid >> 5;  // within the warpgroup
  const int g = lane >> 2, t = lane & 3;
  const int warp_row0 = warp * 16;  // the warp's 16 rows of the warpgroup's 64
  const int row0 = e.row0 + group * Tr::kRowsPerGroup;
  const PackedRows token_head(p, w.kv_head);
  const int q_buffer = Tr::kQBuffers > 1 ? int(rows_in.items & 1u) : 0;
  const auto q_tile = sm.q(group, q_buffer);
  constexpr int EB = Tr::kElemBytes;

  if (!(Tr::kPersistent && rows_in.staged)) {
    // One tile: every warp of the group has flushed the last item's output from it.
    if constexpr (Tr::kPersistent && Tr::kQBuffers == 1)
      if (rows_in.items > 0) named_barrier_sync(kBarQFree + group, 128);
    prefill_stage_q<Tr::kQPasses, Tr::kRowsPerPass, EB>(p, token_head, row0, e.packed_len, e.qo_begin, q_tile,
                                                        gtid / Tr::kLanesPerRow, (gtid % Tr::kLanesPerRow) * 8);
    cp_async_commit();
  }

  auto packed_row = [&](int h) { return row0 + warp_row0 + g + 8 * h; };
  auto token_of = [&](int pr) { return min(int(p.group.div(pr)), e.qo_len - 1); };
  Variant var[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) var[h] = token_head.variant<Variant>(w.request, packed_row(h), e.kv_len, e.qo_len);
  cp_async_wait<0>();
  if constexpr (Variant::kRope) {
    // Rotate this thread's own staged Q slices (partners by shuffle), once, into qk_t.
    const int dim0 = (gtid % Tr::kLanesPerRow) * 8, row_in_pass = gtid / Tr::kLanesPerRow;
    prefill_rotate_staged<Tr::kQPasses, Tr::kRowsPerPass, T, typename Tr::qk_t>(
        q_tile, row_in_pass, dim0, [&](frag8& f, int r) {
          var[0].template transform_query<D>(f, e.pos_offset + token_of(row0 + r), dim0, Tr::kRopePartner);
        });
  }
  fence_proxy_async_shared();  // this thread's Q copies (rotated), before the tensor cores read them
  named_barrier_sync(kBarQReady + group, 128);
  if constexpr (Tr::kPersistent && Tr::kQBuffers > 1) {
    // The other tile held the last item's output, which every warp of the
    // group flushed before the barrier above: the next item's rows go there.
    // (Its extent without recording a bad table entry: its own item records it.)
    rows_in.staged = false;
    if (has_next) {
      const typename Tr::KVSource next_kv(p.kv, next.request, false);
      const PrefillExtent ne =
          prefill_extent<Tr::kTileQ, Tr::kTileKV, Tr::kMaskMode, Tr::kWindow, false>(p, next, next_kv.length());
      if (ne.row0 < ne.packed_len) {  // else a padding item, which every role skips
        prefill_stage_q<Tr::kQPasses, Tr::kRowsPerPass, EB>(
            p, PackedRows(p, next.kv_head), ne.row0 + group * Tr::kRowsPerGroup, ne.packed_len, ne.qo_begin,
            sm.q(group, q_buffer ^ 1), gtid / Tr::kLanesPerRow, (gtid % Tr::kLanesPerRow) * 8);
        cp_async_commit();
        rows_in.staged = true;
      }
    }
  }
  if constexpr (Tr::kPersistent) ++rows_in.items;

  RowState rows;
  rows.init();
  frag_c o[D / 8];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n].zero();

  const int n_tiles = walk.count();
  if (n_tiles > 0) {
    // Turns: this warpgroup waits for its own turn barrier, and ends a turn
    // by arriving at the other's. The second warpgroup lets the first go
    // first and leaves out its last arrival, so the counts match per item.
    auto turn_begin = [&] { named_barrier_sync(kBarTurn + group, 256); };
    auto turn_end = [&](bool last) {
      if (!(last && group == 1)) named_barrier_arrive(kBarTurn + (group ^ 1), 256);
    };
    if (group == 1) named_barrier_arrive(kBarTurn, 256);
    auto release = [&](const MBarrier& b) {
      __syncwarp();
      if (lane == 0) b.arrive();
      __syncwarp();
    };

    constexpr int kSteps = kTKV / Tr::kKeysPerStep;
    frag_c s[kTKV / 8];
    frag_a pa[kSteps];
    // k-steps of 16 columns of the tiles: 16 dims (16-bit) or 32 (fp8).
    auto issue_qk = [&](int it) {
      const KVTile kt = sm.k(Slot(ring + it).stage);
#pragma unroll
      for (int ks = 0; ks < Tr::kRowCols / 16; ++ks)
        Wgmma<typename Tr::qk_t, kTKV>::ss(s, q_tile.k_major(0, ks * 16), kt.k_major(0, ks * 16), ks > 0);
      wgmma_commit();
    };
    auto issue_pv = [&](int it) {
      const auto vt = sm.v(Slot(ring + it).stage);
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        if constexpr (Tr::kFp8) Wgmma<T, D>::rs(o, pa[kk], vt.k_major(0, kk * 16), true);  // V^T: K-major
        else Wgmma<T, D>::rs(o, pa[kk], vt.mn_major(kk * 16), true);
      }
      wgmma_commit();
    };
    // The base-2 exponent scale: one sm_scale for every head; fp8 also
    // dequantizes, by the scales of each of the thread's rows' heads.
    float escale[Tr::kFp8 ? 2 : 1];
#pragma unroll
    for (int h = 0; h < (Tr::kFp8 ? 2 : 1); ++h) {
      escale[h] = var[0].exponent_scale();
      if constexpr (Tr::kFp8) {
        int token, head;
        token_head(packed_row(h), token, head);
        if (p.scale_q) escale[h] *= p.scale_q[head];
        if (p.scale_k) escale[h] *= p.scale_k[w.kv_head];
      }
    }
    // S_it through the variant (the mask only on tiles it can touch), the
    // running max raised, S_it -> P_it; shrink is what O must be scaled by.
    auto softmax = [&](int it, float (&shrink)[2]) {
      const int base = walk.base(it);
      // A block mask's full tile: only the sequence edge and the window.
      const bool tile_full = walk.full(it);
      bool need_mask = base + kTKV > e.kv_end || (Tr::kMaskMode == kernels::kMaskCustom && !tile_full);
      if constexpr (Tr::kMaskMode == kernels::kMaskCausal) need_mask = need_mask || base + kTKV - 1 > e.min_q_pos;
      if constexpr (Tr::kWindow)
        need_mask = need_mask || (p.var.window_left >= 0 && base < e.max_q_pos - p.var.window_left);
      score_tile(s, var, base, e.kv_end, need_mask, tile_full,
                 [&](int half) { return e.pos_offset + token_of(packed_row(half)); });
      float tile_max[2];
      row_max(s, tile_max);
      if constexpr (Tr::kFp8) {
        rows.raise_max(tile_max, shrink, escale);
        rows.exp2_and_sum(s, escale);  // this thread's columns; the quad adds up at the end
      } else {
        rows.raise_max(tile_max, shrink, escale[0]);
        rows.exp2_and_sum(s, escale[0]);
      }
    };
    // P as the next product's A fragments: only once the product reading the last ones has retired.
    auto convert_p = [&] {
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        if constexpr (Tr::kFp8) pa[kk] = to_a_fragment_e4m3(s[4 * kk], s[4 * kk + 1], s[4 * kk + 2], s[4 * kk + 3]);
        else pa[kk] = to_a_fragment<T>(s[2 * kk], s[2 * kk + 1]);
      }
    };

    float shrink[2];
    {
      const Slot first(ring);
      sm.full_k(first.stage).wait_warp(first.parity);
      turn_begin();
      wgmma_fence();
      issue_qk(0);
      turn_end(false);
      wgmma_wait<0>();
      wgmma_hold(s);
      release(sm.empty_k(first.stage));
      softmax(0, shrink);  // O is still zero: nothing to rescale
      convert_p();
    }
    for (int it = 1; it < n_tiles; ++it) {
      const Slot cur(ring + it), prev(ring + it - 1);
      sm.full_k(cur.stage).wait_warp(cur.parity);
      sm.full_v(prev.stage).wait_warp(prev.parity);
      turn_begin();
      wgmma_fence();
      issue_qk(it);
      issue_pv(it - 1);
      turn_end(false);
      wgmma_wait<1>();  // S_it; P_{it-1} V_{it-1} may still run
      wgmma_hold(s);
      release(sm.empty_k(cur.stage));
      softmax(it, shrink);
      wgmma_wait<0>();
      wgmma_hold(o);
      release(sm.empty_v(prev.stage));
      rescale(o, shrink);
      convert_p();
    }
    {
      const Slot last(ring + n_tiles - 1);
      sm.full_v(last.stage).wait_warp(last.parity);
      turn_begin();
      wgmma_fence();
      issue_pv(n_tiles - 1);
      turn_end(true);
      wgmma_wait<0>();
      wgmma_hold(o);
      release(sm.empty_v(last.stage));
    }
  }
  rows.finalize();
  if constexpr (Tr::kFp8) {
    if (p.scale_v) {
      const float sv = p.scale_v[w.kv_head];
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) o[n].x[i] *= sv;
    }
  }

  // Epilogue: the warp's own Q rows stage its output (every product that
  // read them has retired).
  const PrefillOutput<D, typename Tr::o_t, typename WsSmem<Tr>::OTile> out{
      p, token_head, row0, e.packed_len, e.qo_begin, w.chunk, p.num_chunks > 1, sm.out(group, q_buffer)};
#pragma unroll
  for (int h = 0; h < 2; ++h) out.row(o, h, warp_row0 + g + 8 * h, t, rows.m[h], rows.d[h]);
  out.template flush<16>(warp_row0, lane);
}

// Round r's item for this CTA: rounds of gridDim.x items, in snake order (the
// CTA that takes a round's first item takes the next round's last), so that
// over items listed longest first (causal) the CTAs' totals come out even.
ATTNJIT_DEVICE int prefill_ws_round_item(int round) {
  const int cta = (round & 1) ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  return round * int(gridDim.x) + cta;
}

// The CTA's items, each role calling this with its own part, tile(work,
// next, has_next) (next: the item after it, where one is known). Persistent (outside
// CUDA-graph mode): the items in rounds, with no barrier between them.
// Otherwise as prefill_items (prefill_schedule.cuh) deals them: every thread
// of the CTA meets at kBarItem (a named barrier, reached from each role's own
// code) where prefill_items has __syncthreads(). CUDA-graph mode's counter
// is the producer's first thread's.
template <bool Persistent, class TileFn>
ATTNJIT_DEVICE void prefill_ws_items(const kernels::PrefillParams& p, int& grabbed, TileFn&& tile) {
  constexpr int kAll = kernels::prefill_ws_threads();
  const bool persistent = p.tile_indptr != nullptr;
  if constexpr (Persistent) {
    if (!persistent) {
      const int items = p.work ? p.num_work : p.num_work * (p.num_qo_heads / p.group.d);
      for (int round = 0, x = prefill_ws_round_item(0); x < items; x = prefill_ws_round_item(++round)) {
        const int after = prefill_ws_round_item(round + 1);
        const PrefillWork w = prefill_work(p, x);
        const PrefillWork next = prefill_work(p, after < items ? after : x);
        tile(w, next, after < items);
      }
      return;
    }
  }
  const int total = persistent ? p.tile_indptr[p.batch_size] * (p.num_qo_heads / p.group.d) : 1;
  for (int n = 0;; ++n) {
    if (persistent) {
      if (threadIdx.x == 0) grabbed = atomicAdd(p.work_counter, 1);
      named_barrier_sync(kBarItem, kAll);
    }
    const int i = persistent ? grabbed : n;
    if (i >= total) break;
    tile(persistent ? prefill_graph_work(p, total - 1 - i) : prefill_work(p), PrefillWork{}, false);
    named_barrier_sync(kBarItem, kAll);  // the next item's Q lands where this one staged its output; grabbed is read
  }
  if (persistent && threadIdx.x == 0) {  // the last CTA out zeroes the counters for the next launch
    __threadfence();
    if (atomicAdd(p.work_counter + 1, 1) == int(gridDim.x) - 1) {
      atomicExch(p.work_counter, 0);
      atomicExch(p.work_counter + 1, 0);
    }
  }
}

template <class Tr>
ATTNJIT_DEVICE void prefill_sm90_ws(const kernels::PrefillWsParams& P) {
  const kernels::PrefillParams& p = P.p;
  const WsSmem<Tr> sm{(smem_addr(attnjit_prefill_smem) + 1023u) & ~1023u};
  if (threadIdx.x == 0) {
    // TMA: one arrival (with the bytes) per fill; gather: each producer thread's.
    for (int st = 0; st < Tr::kStages; ++st) {
      sm.full_k(st).init(Tr::kTma ? 1 : 128);
      sm.full_v(st).init(Tr::kTma && !Tr::kFp8 ? 1 : 128);  // fp8: each producer thread's transposed share
      sm.empty_k(st).init(8);  // one arrival per consumer warp
      sm.empty_v(st).init(8);
      if constexpr (Tr::kFp8) sm.landed_v(st).init(1);
    }
    fence_mbarrier_init();
    if constexpr (Tr::kTma) {
      tma_prefetch_map(P.k_map);
      tma_prefetch_map(P.v_map);
    }
  }
  __syncthreads();

  // Each role runs its own item loop (ptxas keeps a warpgroup's register
  // budget only over code no other role shares).
  __shared__ int grabbed;  // CUDA-graph mode: the item the producer drew, for every role
  uint32_t ring = 0;       // ring uses so far, counted alike by every role
  const int role = threadIdx.x / 128;  // 0: producer, 1 and 2: consumers
  if (role == 0) {
    warpgroup_release_registers<Tr::kProducerRegs>();
    prefill_ws_items<Tr::kPersistent>(p, grabbed, [&](const PrefillWork& w, const PrefillWork&, bool) {
      // A bad table entry is recorded by the consumers, which read the same (no call here: 24 registers).
      const typename Tr::KVSource kv(p.kv, w.request, false);
      const PrefillExtent e =
          prefill_extent<Tr::kTileQ, Tr::kTileKV, Tr::kMaskMode, Tr::kWindow, false>(p, w, kv.length());
      if (e.row0 >= e.packed_len) return;  // a batch's padding item: the whole CTA skips it
      const WsWalk<Tr> walk(p, w.request, w.q_tile, w.kv_head, e);
      prefill_ws_produce<Tr>(P, w, e, walk, kv, sm, ring);
      ring += uint32_t(walk.count());
    });
  } else {
    warpgroup_claim_registers<Tr::kConsumerRegs>();
    WsQueryRows rows_in;
    prefill_ws_items<Tr::kPersistent>(p, grabbed, [&](const PrefillWork& w, const PrefillWork& next, bool has_next) {
      const typename Tr::KVSource kv(p.kv, w.request);
      const PrefillExtent e = prefill_extent<Tr::kTileQ, Tr::kTileKV, Tr::kMaskMode, Tr::kWindow>(p, w, kv.length());
      if (e.row0 >= e.packed_len) return;
      const WsWalk<Tr> walk(p, w.request, w.q_tile, w.kv_head, e);
      prefill_ws_consume<Tr>(p, w, e, walk, sm, ring, role - 1, rows_in, next, has_next);
      ring += uint32_t(walk.count());
    });
  }
}

}  // namespace attnjit

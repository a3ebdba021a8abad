// Parameters and tile sizes of the warp-specialized Hopper prefill
// (prefill_sm90_ws.cuh), included by host and device code: the prefill
// params plus the TMA maps of K and V (encoded by the launcher,
// runtime/src/ops/prefill_launch.cpp; unused by a paged source, whose rows
// the producer gathers).
#pragma once
#include "prefill_params.h"
#include "tma_params.h"
#include "variant_params.h"

namespace attnjit {
namespace kernels {

// K map: [rows, kv heads, head_dim] with the cache's strides, a box of 64
// dims x 1 head x tile_kv rows in 128-byte swizzle (one 64-column block of
// swizzled_tile.cuh); V the same. fp8 (e4m3, one byte an element): boxes
// of 128 dims (still 128 bytes a row). Contiguous rows are the sequence's; ragged
// rows are the whole tensor's, a request starting at its indptr entry.
struct PrefillWsParams {
  PrefillParams p;
  TmaMap k_map;
  TmaMap v_map;
};

// A CTA: one producer warpgroup and two consumer warpgroups of 64 query rows.
ATTNJIT_HOST_DEVICE constexpr int prefill_ws_threads() { return 3 * 128; }
ATTNJIT_HOST_DEVICE constexpr int prefill_ws_tile_q() { return 128; }
// K and V by TMA: contiguous and ragged sources, except with RoPE, whose
// keys the producer's 128 threads gather by cp.async (as for a paged cache)
// and rotate in shared memory before announcing them; a TMA producer is one
// thread with no registers to rotate.
ATTNJIT_HOST_DEVICE constexpr bool prefill_ws_tma(bool tma_source, int pos_mode) {
  return tma_source && pos_mode != kPosRopeLlama;
}
// Producer registers after setmaxnreg (consumers get the rest of the 64K at
// 384 threads): TMA issues only; a gather keeps its row addresses; RoPE's
// rotation walk (RotaryWalk: sin, cos and their steps, 4 dims at a time) on top.
// fp8: the 128 producer threads also transpose each V tile (fp8 wgmma reads
// both operands K-major), a few words each in flight.
ATTNJIT_HOST_DEVICE constexpr int prefill_ws_producer_regs(bool tma, int pos_mode, bool fp8 = false) {
  return fp8 ? 56 : tma ? 24 : pos_mode != kPosRopeLlama ? 40 : 72;
}
// Keys a tile: 176 for 128-wide heads in the plain variant (no mask, window,
// soft cap or ALiBi) on a TMA source (contiguous, ragged): S is then 88
// accumulators a thread beside O's 64, and more keys a tile share each
// barrier, turn and row-max reduction; with any of those the consumers
// spill at 176 (ptxas), so 128 up to 128-wide heads (a causal window
// spilled there while its mask was a chain of tests per score, branched
// around each: now a run of keys per row, mask.cuh's KeyRun). 256-wide heads
// take 64 (their O is already 128 accumulators per thread; two stages of
// 64 x 256 fit).
// fp8 (128-wide heads only): 128 keys, one 128-byte swizzle row of the
// transposed V tile.
ATTNJIT_HOST_DEVICE constexpr int prefill_ws_tile_kv(int head_dim, int mask_mode, bool window, bool soft_cap,
                                                     int pos_mode, bool tma_source, bool fp8 = false) {
  if (fp8) return 128;
  if (head_dim > 128) return 64;
  if (head_dim < 128) return 128;
  if (mask_mode == kMaskNone && !window && !soft_cap && pos_mode == kPosNone && tma_source) return 176;
  return 128;
}
// The most dynamic shared memory an sm_90 block may opt in to (227 KB).
ATTNJIT_HOST_DEVICE constexpr int prefill_ws_smem_limit() { return 227 * 1024; }
// `q_buffers` Q tiles, `stages` K and V tiles of tile_kv rows and four
// mbarriers a stage (K and V, full and empty), from a 1024-byte aligned base
// (1 KB for the alignment). fp8: Q tiles keep the 16-bit size (they stage
// the 16-bit output), K and V tiles hold bytes, and each stage adds V's
// landing tile (TMA writes it, the producer transposes it into the V tile)
// and its barrier.
ATTNJIT_HOST_DEVICE constexpr int prefill_ws_smem_bytes(int head_dim, int tile_kv, int stages, int q_buffers = 1,
                                                        bool fp8 = false) {
  return fp8 ? 1024 + q_buffers * prefill_ws_tile_q() * head_dim * 2 + 3 * stages * tile_kv * head_dim + 5 * stages * 8
             : 1024 + (q_buffers * prefill_ws_tile_q() + 2 * stages * tile_kv) * head_dim * 2 + 4 * stages * 8;
}
// A persistent CTA (one per SM, items in rounds) stages the next item's Q
// rows while this one runs, in a second Q tile, where one fits (d 64, d 128
// with 128-key tiles); else its consumers stage each item's Q at its start.
ATTNJIT_HOST_DEVICE constexpr int prefill_ws_q_buffers(int head_dim, int tile_kv, int stages, bool persistent,
                                                       bool fp8 = false) {
  return persistent && prefill_ws_smem_bytes(head_dim, tile_kv, stages, 2, fp8) <= prefill_ws_smem_limit() ? 2 : 1;
}

}  // namespace kernels
}  // namespace attnjit

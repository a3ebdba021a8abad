// Decode attention skeleton: one query token per head against a KV sequence
// (or, for speculative decoding at head dims the tensor-core skeleton does
// not take, kTokens tokens x kHeads heads per CTA, token-major, each at its
// own position behind the variant's causal or draft-tree mask).
//
// Grid (group_size / kHeads, work items, num_kv_heads); a CTA owns kHeads
// query heads that share one KV head and one work item (a chunk of one
// request's sequence, decode_work.cuh), so each K
// and V row is read from memory once per CTA; sibling CTAs of a larger group
// are adjacent in launch order and find the rows in L2. Within the CTA a row
// is spread over kLanesPerRow lanes, 8 elements (one 16-byte or 8-byte load)
// each; a warp covers kRowsPerWarpStep rows per step and kUnroll steps per
// iteration, keeping 2*kUnroll independent loads in flight per thread, and
// the next iteration's loads are issued before this one computes. Each
// lane group keeps its own online-softmax state; the states are merged across
// lanes, then warps, at the end. With more than one split, each CTA writes a
// normalized partial state and merge.cuh combines them. K and V are found
// through the KV source (kv_source.cuh), so one skeleton serves every cache
// layout: single decode reads request 0 of a contiguous source, batch decode
// the item's request of a paged one.
#pragma once
#include "decode_epilogue.cuh"
#include "decode_params.h"
#include "decode_prefetch.cuh"
#include "decode_queries.cuh"
#include "decode_row_variant.cuh"
#include "decode_scales.cuh"
#include "decode_work.cuh"
#include "kv_source.cuh"
#include "numeric.cuh"
#include "softmax_state.cuh"
#include "variant.cuh"

namespace attnjit {

template <int HeadDim, int HeadsPerCta, class QT, class KVT, class OT, int PosMode, bool SoftCap, int Warps,
          int Unroll, template <class> class KVSourceT, int MaskMode = kernels::kMaskNone, int TokensPerCta = 1>
struct DecodeTraits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256 || HeadDim == 512,
                "head_dim must be 64, 128, 256 or 512");
  static_assert(TokensPerCta == 1 || MaskMode != kernels::kMaskNone,
                "several query tokens of a request are causal among themselves, or follow a draft-tree mask");
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeads = HeadsPerCta;
  static constexpr int kTokens = TokensPerCta;
  static constexpr int kRows = HeadsPerCta * TokensPerCta;  // query rows: token-major (decode_queries.cuh)
  // One query token per request (plain decode): no mask, every row at the
  // last position. A mask means several tokens (speculative decoding), whose
  // CTAs may still take one token each.
  static constexpr bool kOneToken = MaskMode == kernels::kMaskNone;
  static constexpr int kWarps = Warps;
  static constexpr int kUnroll = Unroll;
  static constexpr int kThreads = Warps * 32;
  // A lane holds 8 elements of a row, or 16 (two 8-wide fragments) for
  // 512-wide heads, whose row would otherwise span two warps.
  static constexpr int kFrags = HeadDim > 256 ? HeadDim / 256 : 1;
  static constexpr int kLanesPerRow = HeadDim / (8 * kFrags);
  static constexpr int kRowsPerWarpStep = 32 / kLanesPerRow;
  static constexpr int kRowsPerIter = Warps * kRowsPerWarpStep * Unroll;
  static constexpr int kSmemBytes = kernels::decode_smem_bytes(Warps, kRows, HeadDim);
  using q_t = QT;
  using kv_t = KVT;
  using o_t = OT;
  using KVSource = KVSourceT<KVT>;
  using Rows = DecodeQueryRows<HeadsPerCta, TokensPerCta>;
  // No window check per row for one token: a work item's rows start inside
  // the window (decode_work.cuh); later tokens' windows start later and are checked.
  using Variant = AttentionVariant<PosMode, SoftCap, MaskMode, MaskMode != kernels::kMaskNone>;
};

extern __shared__ __align__(16) float attnjit_decode_smem[];

template <class Tr>
ATTNJIT_DEVICE void single_decode(const kernels::DecodeParams& p) {
  using kv_t = typename Tr::kv_t;
  constexpr int kQBytes = storage_bytes<typename Tr::q_t>::value;
  constexpr int kKVBytes = storage_bytes<kv_t>::value;
  constexpr int kF = Tr::kFrags;

  const kernels::DecodeWorkItem item = decode_cta_start<typename Tr::KVSource, Tr::kHeadDim>(p);
  if (item.request < 0) return;  // padding of a fixed grid: uniform across the CTA
  const int kv_head = decode_kv_head();
  const typename Tr::Rows queries(p, item.request, kv_head);
  // A token tile past the request's tokens, or a request cum_seq_lens_q voids: uniform across the CTA.
  if (queries.empty()) return;
  const int head0 = queries.head0;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int slice = lane % Tr::kLanesPerRow;        // which 8 (16) dims of a row
  const int row_in_step = lane / Tr::kLanesPerRow;  // which row of a warp step
  const int dim0 = slice * 8 * kF;
  constexpr int kRopePartner = Tr::kLanesPerRow / 2;  // lane holding dims +- D/2

  const typename Tr::KVSource kv(p.kv, item.request);
  const int kv_len = kv.length();
  const DecodeWork work = resolve_work(item, p.var.window_left, kv_len, Tr::kOneToken ? 1 : queries.q_len);
  const char* q_base = static_cast<const char*>(p.q) + queries.q_elem(p, 0) * kQBytes;
  const kernels::VariantParams var = decode_variant_params(p);  // the scale factor read once, here

  // The query rows, transformed (RoPE) and pre-scaled once. One token: every
  // row is the last position; several: each token's own (a padding token,
  // never stored, is zero and borrows the last token's mask row).
  typename Tr::Variant variant[Tr::kRows] = {};
  frag8 q[Tr::kRows][kF];
  int q_pos[Tr::kRows];
#pragma unroll
  for (int h = 0; h < Tr::kRows; ++h) {
    if constexpr (Tr::kOneToken) {
      q_pos[h] = kv_len - 1;
      variant[h] = typename Tr::Variant(var, work.request, head0 + h, p.num_qo_heads, kv_len);
#pragma unroll
      for (int f = 0; f < kF; ++f)
        q[h][f] = load8<typename Tr::q_t>(q_base + ((head0 + h) * p.q_stride_h + dim0 + 8 * f) * kQBytes);
    } else {
      q_pos[h] = Tr::Variant::MaskT::kMode == kernels::kMaskDraft ? queries.mask_q_pos(h, kv_len)
                                                                  : queries.q_pos(h, kv_len);
      variant[h] = decode_row_variant<typename Tr::Variant>(var, p, queries, work.request, h, kv_len);
      const char* at = static_cast<const char*>(p.q) + (queries.q_elem(p, queries.stored(h) ? h : 0) +
                                                        queries.head(h) * p.q_stride_h + dim0) * kQBytes;
#pragma unroll
      for (int f = 0; f < kF; ++f) {
        q[h][f].zero();
        if (queries.stored(h)) q[h][f] = load8<typename Tr::q_t>(at + 8 * f * kQBytes);
      }
    }
#pragma unroll
    for (int f = 0; f < kF; ++f) {
      variant[h].template transform_query<Tr::kHeadDim>(q[h][f], q_pos[h], dim0 + 8 * f, kRopePartner);
#pragma unroll
      for (int i = 0; i < 8; ++i) q[h][f].x[i] *= variant[h].q_scale;
    }
  }

  // One state per row and fragment: a row's fragments see the same logits,
  // so their maxima and sums agree (the compiler computes them once).
  SoftmaxState state[Tr::kRows][kF];
#pragma unroll
  for (int h = 0; h < Tr::kRows; ++h)
#pragma unroll
    for (int f = 0; f < kF; ++f) state[h][f].init();

  const int begin = work.begin, end = work.end;
  const auto kv_slice = kv.slice(kv_head, dim0);  // bound here, after the query: fewer registers live across it

  // Rows past the end load the last row (always valid memory) and are masked
  // below, so the loads carry no branch and all issue together.
  auto load_rows = [&](int base, raw8<kv_t>(&kr)[kF][Tr::kUnroll], raw8<kv_t>(&vr)[kF][Tr::kUnroll]) {
#pragma unroll
    for (int u = 0; u < Tr::kUnroll; ++u) {
      const int r = min(base + (u * Tr::kWarps + warp) * Tr::kRowsPerWarpStep + row_in_step, end - 1);
      const KVRowAddress at = kv_slice.row(r);
      kr[0][u] = load_raw8<kv_t>(at.k);
      vr[0][u] = load_raw8<kv_t>(at.v);
#pragma unroll
      for (int f = 1; f < kF; ++f) {
        kr[f][u] = load_raw8<kv_t>(at.k + 8 * f * kKVBytes);
        vr[f][u] = load_raw8<kv_t>(at.v + 8 * f * kKVBytes);
      }
    }
  };
  // Software pipeline: the next iteration's K/V loads are in flight while this
  // iteration computes, so each warp always has memory requests outstanding.
  raw8<kv_t> k_raw[kF][Tr::kUnroll], v_raw[kF][Tr::kUnroll];
  if (begin < end) load_rows(begin, k_raw, v_raw);
  for (int base = begin; base < end; base += Tr::kRowsPerIter) {
    raw8<kv_t> k_next[kF][Tr::kUnroll], v_next[kF][Tr::kUnroll];
    const bool more = base + Tr::kRowsPerIter < end;  // uniform across the CTA
    if (more) load_rows(base + Tr::kRowsPerIter, k_next, v_next);

    int row[Tr::kUnroll];
    frag8 k[kF][Tr::kUnroll], v[kF][Tr::kUnroll];
#pragma unroll
    for (int u = 0; u < Tr::kUnroll; ++u) {
      row[u] = base + (u * Tr::kWarps + warp) * Tr::kRowsPerWarpStep + row_in_step;
#pragma unroll
      for (int f = 0; f < kF; ++f) {
        k[f][u] = to_frag8(k_raw[f][u]);
        v[f][u] = to_frag8(v_raw[f][u]);
      }
    }
    // Keys are shared by the CTA's rows: transformed once, by any row's variant.
#pragma unroll
    for (int u = 0; u < Tr::kUnroll; ++u)
#pragma unroll
      for (int f = 0; f < kF; ++f)
        variant[0].template transform_key<Tr::kHeadDim>(k[f][u], row[u], dim0 + 8 * f, kRopePartner);
#pragma unroll
    for (int h = 0; h < Tr::kRows; ++h) {
      float s[Tr::kUnroll];
#pragma unroll
      for (int u = 0; u < Tr::kUnroll; ++u) {
        float dot = 0.f;
#pragma unroll
        for (int f = 0; f < kF; ++f)
#pragma unroll
          for (int i = 0; i < 8; ++i) dot = fmaf(q[h][f].x[i], k[f][u].x[i], dot);
        dot = sum_over_lanes<Tr::kLanesPerRow>(dot);
        s[u] = row[u] < end && variant[h].keep(q_pos[h], row[u]) ? variant[h].logit(dot, row[u]) : neg_inf();
      }
#pragma unroll
      for (int f = 0; f < kF; ++f) state[h][f].update(s, v[f]);
    }
    if (more) {
#pragma unroll
      for (int u = 0; u < Tr::kUnroll; ++u) {
#pragma unroll
        for (int f = 0; f < kF; ++f) {
          k_raw[f][u] = k_next[f][u];
          v_raw[f][u] = v_next[f][u];
        }
      }
    }
  }

  pdl_launch_dependents();  // the next kernel may start its prologue: this CTA only merges and stores now
  kv_slice.report_bad_pages(kv_len);  // cold: only where a page id was bad

  // Merge the lane groups of each warp (they hold disjoint rows).
#pragma unroll
  for (int h = 0; h < Tr::kRows; ++h) {
#pragma unroll
    for (int off = Tr::kLanesPerRow; off < 32; off *= 2)
#pragma unroll
      for (int f = 0; f < kF; ++f) state[h][f].merge_lane_xor(off);
  }

  // Then the warps, through shared memory: [warp][row][m, d, o...].
  constexpr int kStride = Tr::kHeadDim + 2;
  float* smem = attnjit_decode_smem;
  if (row_in_step == 0) {
#pragma unroll
    for (int h = 0; h < Tr::kRows; ++h) {
      float* rec = smem + (warp * Tr::kRows + h) * kStride;
      if (slice == 0) {
        rec[0] = state[h][0].m;
        rec[1] = state[h][0].d;
      }
#pragma unroll
      for (int f = 0; f < kF; ++f)
#pragma unroll
        for (int i = 0; i < 8; ++i) rec[2 + dim0 + 8 * f + i] = state[h][f].o.x[i];
    }
  }
  __syncthreads();

  finish_decode<typename Tr::o_t, Tr::kHeadDim, typename Tr::Rows, Tr::kWarps, Tr::kRows>(smem, work, queries, p);
}

}  // namespace attnjit

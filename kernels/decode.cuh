// Decode attention skeleton: one query token per head against a KV sequence.
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
#include "decode_scales.cuh"
#include "decode_work.cuh"
#include "kv_source.cuh"
#include "numeric.cuh"
#include "softmax_state.cuh"
#include "variant.cuh"

namespace attnjit {

template <int HeadDim, int HeadsPerCta, class QT, class KVT, class OT, int PosMode, bool SoftCap, int Warps,
          int Unroll, template <class> class KVSourceT, int MaskMode = kernels::kMaskNone>
struct DecodeTraits {
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim must be 64, 128 or 256");
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeads = HeadsPerCta;
  static constexpr int kWarps = Warps;
  static constexpr int kUnroll = Unroll;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kLanesPerRow = HeadDim / 8;
  static constexpr int kRowsPerWarpStep = 32 / kLanesPerRow;
  static constexpr int kRowsPerIter = Warps * kRowsPerWarpStep * Unroll;
  static constexpr int kSmemBytes = kernels::decode_smem_bytes(Warps, HeadsPerCta, HeadDim);
  using q_t = QT;
  using kv_t = KVT;
  using o_t = OT;
  using KVSource = KVSourceT<KVT>;
  // No window check per row: a work item's rows start inside the window (decode_work.cuh).
  using Variant = AttentionVariant<PosMode, SoftCap, MaskMode>;
};

extern __shared__ __align__(16) float attnjit_decode_smem[];

template <class Tr>
ATTNJIT_DEVICE void single_decode(const kernels::DecodeParams& p) {
  using kv_t = typename Tr::kv_t;
  constexpr int kQBytes = storage_bytes<typename Tr::q_t>::value;

  warm_first_rows<typename Tr::KVSource, Tr::kHeadDim>(p);  // while the kernel before finishes
  pdl_wait();  // q, the cache and the work list may come from the kernel before
  const kernels::DecodeWorkItem item = decode_work_item(p);
  if (item.request < 0) return;  // padding of a fixed grid: uniform across the CTA
  const int kv_head = decode_kv_head();
  // One query token per request: the multi-token (causal) variants run on tensor cores (decode_mma.cuh).
  const DecodeQueryRows<Tr::kHeads, 1> queries(p, item.request, kv_head);
  const int head0 = queries.head0;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int slice = lane % Tr::kLanesPerRow;        // which 8 dims of a row
  const int row_in_step = lane / Tr::kLanesPerRow;  // which row of a warp step
  const int dim0 = slice * 8;
  constexpr int kRopePartner = Tr::kLanesPerRow / 2;  // lane holding dims +- D/2

  const typename Tr::KVSource kv(p.kv, item.request);
  const int kv_len = kv.length();
  const int q_pos = kv_len - 1;
  const DecodeWork work = resolve_work(item, p.var.window_left, kv_len);
  const char* q_base = static_cast<const char*>(p.q) + queries.q_elem(p, 0) * kQBytes;
  const kernels::VariantParams var = decode_variant_params(p);  // the scale factor read once, here

  // The query heads, transformed (RoPE) and pre-scaled once.
  typename Tr::Variant variant[Tr::kHeads] = {};
  frag8 q[Tr::kHeads];
#pragma unroll
  for (int h = 0; h < Tr::kHeads; ++h) {
    variant[h] = typename Tr::Variant(var, work.request, head0 + h, p.num_qo_heads, kv_len);
    q[h] = load8<typename Tr::q_t>(q_base + ((head0 + h) * p.q_stride_h + dim0) * kQBytes);
    variant[h].template transform_query<Tr::kHeadDim>(q[h], q_pos, dim0, kRopePartner);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[h].x[i] *= variant[h].q_scale;
  }

  SoftmaxState state[Tr::kHeads];
#pragma unroll
  for (int h = 0; h < Tr::kHeads; ++h) state[h].init();

  const int begin = work.begin, end = work.end;
  const auto kv_slice = kv.slice(kv_head, dim0);  // bound here, after the query: fewer registers live across it

  // Rows past the end load the last row (always valid memory) and are masked
  // below, so the loads carry no branch and all issue together.
  auto load_rows = [&](int base, raw8<kv_t>(&kr)[Tr::kUnroll], raw8<kv_t>(&vr)[Tr::kUnroll]) {
#pragma unroll
    for (int u = 0; u < Tr::kUnroll; ++u) {
      const int r = min(base + (u * Tr::kWarps + warp) * Tr::kRowsPerWarpStep + row_in_step, end - 1);
      const KVRowAddress at = kv_slice.row(r);
      kr[u] = load_raw8<kv_t>(at.k);
      vr[u] = load_raw8<kv_t>(at.v);
    }
  };
  // Software pipeline: the next iteration's K/V loads are in flight while this
  // iteration computes, so each warp always has memory requests outstanding.
  raw8<kv_t> k_raw[Tr::kUnroll], v_raw[Tr::kUnroll];
  if (begin < end) load_rows(begin, k_raw, v_raw);
  for (int base = begin; base < end; base += Tr::kRowsPerIter) {
    raw8<kv_t> k_next[Tr::kUnroll], v_next[Tr::kUnroll];
    const bool more = base + Tr::kRowsPerIter < end;  // uniform across the CTA
    if (more) load_rows(base + Tr::kRowsPerIter, k_next, v_next);

    int row[Tr::kUnroll];
    frag8 k[Tr::kUnroll], v[Tr::kUnroll];
#pragma unroll
    for (int u = 0; u < Tr::kUnroll; ++u) {
      row[u] = base + (u * Tr::kWarps + warp) * Tr::kRowsPerWarpStep + row_in_step;
      k[u] = to_frag8(k_raw[u]);
      v[u] = to_frag8(v_raw[u]);
    }
    // Keys are shared by the CTA's heads: transformed once, by any head's variant.
#pragma unroll
    for (int u = 0; u < Tr::kUnroll; ++u)
      variant[0].template transform_key<Tr::kHeadDim>(k[u], row[u], dim0, kRopePartner);
#pragma unroll
    for (int h = 0; h < Tr::kHeads; ++h) {
      float s[Tr::kUnroll];
#pragma unroll
      for (int u = 0; u < Tr::kUnroll; ++u) {
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(q[h].x[i], k[u].x[i], dot);
        dot = sum_over_lanes<Tr::kLanesPerRow>(dot);
        s[u] = row[u] < end && variant[h].keep(q_pos, row[u]) ? variant[h].logit(dot, row[u]) : neg_inf();
      }
      state[h].update(s, v);
    }
    if (more) {
#pragma unroll
      for (int u = 0; u < Tr::kUnroll; ++u) {
        k_raw[u] = k_next[u];
        v_raw[u] = v_next[u];
      }
    }
  }

  pdl_launch_dependents();  // the next kernel may start its prologue: this CTA only merges and stores now

  // Merge the lane groups of each warp (they hold disjoint rows).
#pragma unroll
  for (int h = 0; h < Tr::kHeads; ++h) {
#pragma unroll
    for (int off = Tr::kLanesPerRow; off < 32; off *= 2) state[h].merge_lane_xor(off);
  }

  // Then the warps, through shared memory: [warp][head][m, d, o...].
  constexpr int kStride = Tr::kHeadDim + 2;
  float* smem = attnjit_decode_smem;
  if (row_in_step == 0) {
#pragma unroll
    for (int h = 0; h < Tr::kHeads; ++h) {
      float* rec = smem + (warp * Tr::kHeads + h) * kStride;
      if (slice == 0) {
        rec[0] = state[h].m;
        rec[1] = state[h].d;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) rec[2 + dim0 + i] = state[h].o.x[i];
    }
  }
  __syncthreads();

  finish_decode<typename Tr::o_t, Tr::kHeadDim, DecodeQueryRows<Tr::kHeads, 1>, Tr::kWarps, Tr::kHeads>(
      smem, work, queries, p);
}

}  // namespace attnjit

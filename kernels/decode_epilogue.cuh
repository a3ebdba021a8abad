// The end of every decode skeleton: each warp has left one softmax state per
// query row (a head, or a token x head: decode_queries.cuh) in shared memory;
// merge them across warps and write the row's output (or, with split KV, its
// normalized partial state). A split request's partial states are merged
// by merge.cuh's kernel, or, when the launch has counters
// (DecodeParams::merge_counters), here: the last CTA of the row group to
// finish merges them. That saves the merge kernel and its wait for the
// whole decode grid: a row's merge starts once its own chunks are done,
// while other requests' CTAs still run. Single decode keeps the merge
// kernel: its one request's rows all end with the single wave, where the
// merge kernel, launched early (PDL), was the faster of the two.
#pragma once
#include "decode_params.h"
#include "decode_queries.cuh"
#include "decode_scales.cuh"
#include "decode_work.cuh"
#include "numeric.cuh"
#include "softmax_state.cuh"
#include "state_fold.cuh"
#include "variant.cuh"

namespace attnjit {

// The state's output: o over its denominator, times the V scale (1 when the
// state is merged from partial states, which have it).
ATTNJIT_DEVICE frag8 scaled_output(const SoftmaxState& acc, float v_scale) {
  frag8 out = acc.normalized();
#pragma unroll
  for (int i = 0; i < 8; ++i) out.x[i] *= v_scale;
  return out;
}

// Row r's final state to o (its output type) and lse, with the sink.
template <class OT, int HeadDim, class Rows>
ATTNJIT_DEVICE void store_row(SoftmaxState& acc, float v_scale, const Rows& rows, int r, int d0,
                              const kernels::DecodeParams& p) {
  const int head = rows.head(r);
  apply_sink(acc, p.var.sinks, head);
  const frag8 out = scaled_output(acc, v_scale);
  store8<OT>(static_cast<char*>(p.o) + (rows.o_elem(p, r) + head * p.o_stride_h + d0) * storage_bytes<OT>::value, out);
  if (p.lse && d0 == 0) p.lse[rows.q_row(r) * p.num_qo_heads + head] = acc.lse();
}

// states: record of (warp w, row r) at states + (w * WarpStride + r) * (HeadDim + 2),
// holding [m, d, o[0..HeadDim)]; Records of them per row (the warps', by
// default). All threads of the CTA call this after a barrier. v_scale: read
// once by the caller, outside the loop (the factor may be a load).
template <class OT, int HeadDim, class Rows, int Warps, int WarpStride, int Records = Warps>
ATTNJIT_DEVICE void merge_warps_and_store(const float* states, const DecodeWork& work, const Rows& rows,
                                          const kernels::DecodeParams& p, float v_scale) {
  constexpr int kSlices = HeadDim / 8;
  for (int item = threadIdx.x; item < Rows::kRows * kSlices; item += Warps * 32) {
    const int r = item / kSlices;
    if (!rows.stored(r)) continue;  // a token past the request's last: padding of the tile
    const int d0 = (item % kSlices) * 8;
    SoftmaxState acc;
    acc.init();
    for (int w = 0; w < Records; ++w) {
      const float* rec = states + (w * WarpStride + r) * (HeadDim + 2);
      frag8 o;
#pragma unroll
      for (int i = 0; i < 8; ++i) o.x[i] = rec[2 + d0 + i];
      acc.merge(rec[0], rec[1], o);
    }
    if (work.slot < 0) {
      store_row<OT, HeadDim>(acc, v_scale, rows, r, d0, p);
    } else {  // a split's partial state goes without the sink
      const int64_t pr = rows.partial_row(work.slot, r, p.num_qo_heads);
      store8<f32>(p.partial_o + pr * HeadDim + d0, scaled_output(acc, v_scale));
      if (d0 == 0) p.partial_lse[pr] = acc.lse();
    }
  }
}

// Whether this CTA is the last of its row group to have stored its partial
// state; the last one then sees every other's. Every thread of the CTA
// calls it after its stores. One thread arrives for the CTA, after a
// barrier: its release covers the stores the barrier ordered before it (the
// cooperative-groups grid barrier's pattern), its acquire the other CTAs'
// stores before their arrivals. The arrival is on the last CTA's critical
// path, hence one acquire-release atomic and no fence round trips (a fence
// per thread and two atomics were slower). The last one sets the counter
// back to zero: the next launch finds it as this one did.
ATTNJIT_DEVICE bool last_of_row_group(const DecodeWork& work, const kernels::DecodeParams& p) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counter = p.merge_counters + decode_row_group(work.request);
    last = atomic_add_acq_rel(counter, 1) == split_count(p, work.request) - 1;
    if (last) store_relaxed(counter, 0);  // every CTA of the group has arrived; the launch boundary orders the next
  }
  __syncthreads();
  return last;
}

// The last CTA of a row group: merges the partial states of all its chunks
// (state_fold.cuh) and writes o and lse. kGroups thread groups take every
// kGroups-th chunk, 8 chunks' loads in flight at once (the states were just
// written: L2 hits, read past L1, which is not coherent with the other SMs'
// stores), then fold their states together through shared memory, laid out
// as merge_warps_and_store's. A request's slots are affine in k
// (decode_work.cuh's split_slot), so are its rows' states.
template <class OT, int HeadDim, class Rows, int Warps, int WarpStride>
ATTNJIT_DEVICE void merge_splits_and_store(float* states, const DecodeWork& work, const Rows& rows,
                                           const kernels::DecodeParams& p) {
  constexpr int kSlices = HeadDim / 8;
  constexpr int kItems = Rows::kRows * kSlices;
  constexpr int kFit = Warps * 32 / kItems;
  constexpr int kGroups = kFit < 1 ? 1 : kFit > Warps ? Warps : kFit;  // states has Warps records per row
  const int n = split_count(p, work.request);
  const int first_slot = split_slot(p, work.request, 0);
  const int slot_step = split_slot(p, work.request, 1) - first_slot;
  for (int item = threadIdx.x; item < kGroups * kItems; item += Warps * 32) {
    const int group = item / kItems, r = (item % kItems) / kSlices, d0 = (item % kSlices) * 8;
    if (!rows.stored(r)) continue;
    const int64_t row0 = rows.partial_row(first_slot, r, p.num_qo_heads);
    const int64_t row_step = rows.partial_row(first_slot + slot_step, r, p.num_qo_heads) - row0;
    SoftmaxState acc;
    acc.init();
    const StateRun run{p.partial_lse + row0, row_step, reinterpret_cast<const char*>(p.partial_o + row0 * HeadDim + d0),
                       row_step * HeadDim * int64_t(sizeof(float))};
    fold_states<f32, 8, true>(acc, run, group, kGroups, n);
    float* rec = states + (group * WarpStride + r) * (HeadDim + 2);
    if (d0 == 0) {
      rec[0] = acc.m;
      rec[1] = acc.d;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) rec[2 + d0 + i] = acc.o.x[i];
  }
  __syncthreads();
  const DecodeWork whole{work.request, work.begin, work.end, -1};
  merge_warps_and_store<OT, HeadDim, Rows, Warps, WarpStride, kGroups>(states, whole, rows, p, 1.f);
}

// The decode skeletons' last step: the warps' states to the output or a
// partial slot, then, with merge counters, the row group's merge.
template <class OT, int HeadDim, class Rows, int Warps, int WarpStride>
ATTNJIT_DEVICE void finish_decode(float* states, const DecodeWork& work, const Rows& rows,
                                  const kernels::DecodeParams& p) {
  merge_warps_and_store<OT, HeadDim, Rows, Warps, WarpStride>(states, work, rows, p, decode_v_scale(p));
  if (work.slot < 0 || !p.merge_counters || !last_of_row_group(work, p)) return;  // uniform across the CTA
  merge_splits_and_store<OT, HeadDim, Rows, Warps, WarpStride>(states, work, rows, p);
}

}  // namespace attnjit

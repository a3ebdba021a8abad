// Merges partial attention states computed over disjoint KV chunks:
//   lse = log2 sum_s 2^lse_s,   o = sum_s 2^(lse_s - lse) o_s
// One CTA per output row (a row = one query token of one head). The splits
// are spread over the CTA's threads, kGroups of them at a time, so the loads
// of many splits are in flight at once: a loop over splits in one thread
// waits out a memory latency per split (measured: 17 us for 32 splits).
// Single decode's split-KV uses it with a fixed split count; batch decode
// with a per-request count through an indptr (merge_params.h).
#pragma once
#include "merge_params.h"
#include "math.cuh"
#include "numeric.cuh"
#include "softmax_state.cuh"
#include "variant.cuh"

namespace attnjit {

template <int HeadDim, class OT, int Warps>
struct MergeTraits {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kSlices = HeadDim / 8;         // 8-wide slices of a row
  static constexpr int kGroups = kThreads / kSlices;  // splits handled side by side
  using o_t = OT;
};

template <class Tr>
ATTNJIT_DEVICE void merge_states(const kernels::MergeParams& p) {
  __shared__ float warp_max[Tr::kWarps];
  __shared__ __align__(16) float sums[Tr::kGroups][Tr::kHeadDim];
  __shared__ float weights[Tr::kGroups];
  pdl_wait();  // the partial states come from the kernel before
  const int row = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // This row's partials: slots [first, first + num_splits), `stride` rows apart.
  const int request = row / p.rows_per_request;
  const int r = row - request * p.rows_per_request;
  const int stride = p.indptr ? p.rows_per_request : p.num_rows;
  const int first = p.indptr ? p.indptr[request] : 0;
  const int num_splits = p.indptr ? p.indptr[request + 1] - first : p.num_splits;
  if (num_splits <= 0) return;  // written by the decode kernel, or padding: uniform across the CTA
  const int64_t base = p.indptr ? int64_t(first) * stride + r : row;
  const float* part_lse = p.partial_lse + base;
  const float* part_o = p.partial_o + base * Tr::kHeadDim;

  // The largest lse over the splits, so every weight is <= 1.
  float m = neg_inf();
  for (int s = tid; s < num_splits; s += Tr::kThreads) m = fmaxf(m, part_lse[int64_t(s) * stride]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  m = warp_max[0];
#pragma unroll
  for (int w = 1; w < Tr::kWarps; ++w) m = fmaxf(m, warp_max[w]);

  // Weighted sums: thread (group, slice) takes splits group, group + kGroups, ...
  const int slice = tid % Tr::kSlices, group = tid / Tr::kSlices, d0 = slice * 8;
  float d = 0.f;
  frag8 o;
  o.zero();
#pragma unroll 4
  for (int s = group; s < num_splits; s += Tr::kGroups) {
    const int64_t at = int64_t(s) * stride;
    const float w = exp2_rel(part_lse[at], m);
    const frag8 part = load8<f32>(part_o + at * Tr::kHeadDim + d0);
    d += w;
#pragma unroll
    for (int i = 0; i < 8; ++i) o.x[i] = fmaf(w, part.x[i], o.x[i]);
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) sums[group][d0 + i] = o.x[i];
  if (slice == 0) weights[group] = d;
  __syncthreads();

  if (group != 0) return;
  SoftmaxState acc;  // relative to m
  acc.m = m;
  acc.d = 0.f;
  acc.o.zero();
  for (int gi = 0; gi < Tr::kGroups; ++gi) {
    acc.d += weights[gi];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc.o.x[i] += sums[gi][d0 + i];
  }
  apply_sink(acc, p.sinks, r);
  store8<typename Tr::o_t>(static_cast<char*>(p.o) + (request * p.o_stride_request + r * p.o_stride_row + d0) *
                                                     storage_bytes<typename Tr::o_t>::value,
                           acc.normalized());
  if (p.lse && slice == 0) p.lse[row] = acc.lse();
}

}  // namespace attnjit

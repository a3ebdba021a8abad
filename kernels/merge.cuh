// Merges partial attention states computed over disjoint KV chunks:
//   lse = log2 sum_s 2^lse_s,   o = sum_s 2^(lse_s - lse) o_s
// One warp per output row; HeadDim/8 lanes hold 8 dims each. Decode's split-KV
// uses it now; batch decode and prefill reuse it.
#pragma once
#include "decode_params.h"
#include "math.cuh"
#include "numeric.cuh"

namespace attnjit {

template <int HeadDim, class OT, int Warps>
struct MergeTraits {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  using o_t = OT;
};

template <class Tr>
ATTNJIT_DEVICE void merge_states(const kernels::MergeParams& p) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * Tr::kWarps + (threadIdx.x >> 5);
  if (row >= p.num_rows || lane * 8 >= Tr::kHeadDim) return;
  const int d0 = lane * 8;

  float m = neg_inf();
  for (int s = 0; s < p.num_splits; ++s) m = fmaxf(m, p.partial_lse[int64_t(s) * p.num_rows + row]);
  float d = 0.f;
  frag8 o;
  o.zero();
  for (int s = 0; s < p.num_splits; ++s) {
    const int64_t r = int64_t(s) * p.num_rows + row;
    const float w = exp2_rel(p.partial_lse[r], m);
    const frag8 part = load8<f32>(p.partial_o + r * Tr::kHeadDim + d0);
    d += w;
#pragma unroll
    for (int i = 0; i < 8; ++i) o.x[i] = fmaf(w, part.x[i], o.x[i]);
  }
  const float rcp = d > 0.f ? 1.f / d : 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) o.x[i] *= rcp;
  store8<typename Tr::o_t>(static_cast<char*>(p.o) + (row * p.o_stride_row + d0) * storage_bytes<typename Tr::o_t>::value, o);
  if (p.lse && lane == 0) p.lse[row] = d > 0.f ? m + ptx_log2(d) : neg_inf();
}

}  // namespace attnjit

// The end of every decode skeleton: each warp has left one softmax state per
// query row (a head, or a token x head: decode_queries.cuh) in shared memory;
// merge them across warps and write the row's output (or, with split KV, its
// normalized partial state for merge.cuh).
#pragma once
#include "decode_params.h"
#include "decode_queries.cuh"
#include "decode_scales.cuh"
#include "decode_work.cuh"
#include "numeric.cuh"
#include "softmax_state.cuh"
#include "variant.cuh"

namespace attnjit {

// states: record of (warp w, row r) at states + (w * WarpStride + r) * (HeadDim + 2),
// holding [m, d, o[0..HeadDim)]. All threads of the CTA call this after a barrier.
template <class OT, int HeadDim, class Rows, int Warps, int WarpStride>
ATTNJIT_DEVICE void merge_warps_and_store(const float* states, const DecodeWork& work, const Rows& rows,
                                          const kernels::DecodeParams& p) {
  constexpr int kSlices = HeadDim / 8;
  const float v_scale = decode_v_scale(p);  // once, outside the loop: the factor is one load
  for (int item = threadIdx.x; item < Rows::kRows * kSlices; item += Warps * 32) {
    const int r = item / kSlices;
    if (!rows.stored(r)) continue;  // a token past the request's last: padding of the tile
    const int d0 = (item % kSlices) * 8;
    SoftmaxState acc;
    acc.init();
    for (int w = 0; w < Warps; ++w) {
      const float* rec = states + (w * WarpStride + r) * (HeadDim + 2);
      frag8 o;
#pragma unroll
      for (int i = 0; i < 8; ++i) o.x[i] = rec[2 + d0 + i];
      acc.merge(rec[0], rec[1], o);
    }
    const int head = rows.head(r);
    if (work.slot < 0) apply_sink(acc, p.var.sinks, head);  // a split's partial state goes without it
    frag8 out = acc.normalized();
#pragma unroll
    for (int i = 0; i < 8; ++i) out.x[i] *= v_scale;
    if (work.slot < 0) {
      const int64_t row = rows.q_row(r);
      store8<OT>(static_cast<char*>(p.o) + (rows.o_elem(p, r) + head * p.o_stride_h + d0) * storage_bytes<OT>::value,
                 out);
      if (p.lse && d0 == 0) p.lse[row * p.num_qo_heads + head] = acc.lse();
    } else {
      const int64_t pr = rows.partial_row(work.slot, r, p.num_qo_heads);
      store8<f32>(p.partial_o + pr * HeadDim + d0, out);
      if (d0 == 0) p.partial_lse[pr] = acc.lse();
    }
  }
}

}  // namespace attnjit

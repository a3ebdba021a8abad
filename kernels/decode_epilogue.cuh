// The end of every decode skeleton: each warp has left one softmax state per
// query head in shared memory; merge them across warps and write the head's
// output (or, with split KV, its normalized partial state for merge.cuh).
#pragma once
#include "decode_params.h"
#include "decode_work.cuh"
#include "numeric.cuh"
#include "softmax_state.cuh"

namespace attnjit {

// states: record of (warp w, head h) at states + (w * WarpStride + h) * (HeadDim + 2),
// holding [m, d, o[0..HeadDim)]. All threads of the CTA call this after a barrier.
template <class OT, int HeadDim, int Heads, int Warps, int WarpStride>
ATTNJIT_DEVICE void merge_warps_and_store(const float* states, const DecodeWork& work, int head0,
                                          const kernels::DecodeParams& p) {
  constexpr int kSlices = HeadDim / 8;
  for (int item = threadIdx.x; item < Heads * kSlices; item += Warps * 32) {
    const int h = item / kSlices;
    const int d0 = (item % kSlices) * 8;
    SoftmaxState acc;
    acc.init();
    for (int w = 0; w < Warps; ++w) {
      const float* rec = states + (w * WarpStride + h) * (HeadDim + 2);
      frag8 o;
#pragma unroll
      for (int i = 0; i < 8; ++i) o.x[i] = rec[2 + d0 + i];
      acc.merge(rec[0], rec[1], o);
    }
    frag8 out = acc.normalized();
#pragma unroll
    for (int i = 0; i < 8; ++i) out.x[i] *= p.var.v_scale;
    const int head = head0 + h;
    if (work.slot < 0) {
      store8<OT>(static_cast<char*>(p.o) + (work.request * p.o_stride_b + head * p.o_stride_h + d0) * storage_bytes<OT>::value,
                 out);
      if (p.lse && d0 == 0) p.lse[int64_t(work.request) * p.num_qo_heads + head] = acc.lse();
    } else {
      const int64_t r = int64_t(work.slot) * p.num_qo_heads + head;
      store8<f32>(p.partial_o + r * HeadDim + d0, out);
      if (d0 == 0) p.partial_lse[r] = acc.lse();
    }
  }
}

}  // namespace attnjit

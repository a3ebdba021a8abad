// Folding one query row's partial attention states, the normalized states
// (lse_s, o_s) of disjoint KV chunks, into one:
//   lse = log2 sum_s 2^lse_s,   o = sum_s 2^(lse_s - lse) o_s
// as an online softmax (SoftmaxState::merge at weight 1: a normalized state
// has d = 1 at m = lse). Both merges fold this way: the merge kernel's
// (merge.cuh) and the decode kernel's, in the last CTA of a row group
// (decode_epilogue.cuh).
#pragma once
#include "numeric.cuh"
#include "softmax_state.cuh"

namespace attnjit {

// Where one row's states lie: state k's lse at lse[k * lse_step], and the
// 8 elements of o that the thread folds at o + k * o_step bytes. Every slot
// layout the merges read is affine in k (merge_params.h, decode_params.h).
struct StateRun {
  const float* lse;
  int64_t lse_step;
  const char* o;
  int64_t o_step;
};

// Folds states first, first + stride, ... below n into acc, kBatch of them
// with their loads in flight together (one load at a time waits out a
// memory latency per state: 17 us for 32 splits, measured). InT: o's
// element type. kL2: read at the L2, past the SM's L1, which does not see
// other SMs' stores: states other CTAs of the running grid wrote.
template <class InT, int kBatch, bool kL2>
ATTNJIT_DEVICE void fold_states(SoftmaxState& acc, const StateRun& run, int first, int stride, int n) {
  static_assert(!kL2 || storage_bytes<InT>::value == 4, "L2 reads are of float states");
  for (int k0 = first; k0 < n; k0 += stride * kBatch) {
    float lse[kBatch];
    frag8 o[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int64_t k = k0 + j * stride;
      if (k < n) {
        const float* at_lse = run.lse + k * run.lse_step;
        const char* at_o = run.o + k * run.o_step;
        if constexpr (kL2) {
          lse[j] = __ldcg(at_lse);
          o[j] = load8_l2(reinterpret_cast<const float*>(at_o));
        } else {
          lse[j] = *at_lse;
          o[j] = load8<InT>(at_o);
        }
      } else {  // weight 0: exp2(-inf) (the batch's first state is real, k0 < n)
        lse[j] = neg_inf();
        o[j].zero();
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) acc.merge(lse[j], 1.f, o[j]);
  }
}

}  // namespace attnjit

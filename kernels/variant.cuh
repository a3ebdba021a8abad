// The attention variant: how a raw dot product q.k becomes a base-2 logit.
// Kernel skeletons call only these hooks, so masks, soft caps and biases
// never leak into the loop structure.
//
//   x = sm_scale * q.k                (q_scale and k_scale folded into sm_scale)
//   x += slope_h * (j - q_pos)        (ALiBi)
//   x = cap * tanh(x / cap)           (soft cap)
//   logit = x * log2(e)               (softmax runs in base 2)
#pragma once
#include "decode_params.h"
#include "math.cuh"
#include "pos_encoding.cuh"

namespace attnjit {

template <int PosMode, bool SoftCap>
struct AttentionVariant {
  static constexpr bool kAlibi = PosMode == kernels::kPosAlibi;
  static constexpr bool kRope = PosMode == kernels::kPosRopeLlama;
  // With neither bias nor cap the whole transform is one multiply, folded
  // into q once instead of applied to every logit.
  static constexpr bool kFoldScaleIntoQ = !kAlibi && !SoftCap;

  float q_scale;      // multiplies q up front
  float alibi_slope;  // of this head
  float soft_cap, rcp_soft_cap;
  float q_pos;

  AttentionVariant() = default;
  ATTNJIT_DEVICE AttentionVariant(float sm_scale, float cap, int qo_head, int num_qo_heads, int kv_len)
      : q_scale(kFoldScaleIntoQ ? sm_scale * kLog2e : sm_scale),
        alibi_slope(kAlibi ? attnjit::alibi_slope(qo_head, num_qo_heads) : 0.f),
        soft_cap(cap),
        rcp_soft_cap(SoftCap ? 1.f / cap : 0.f),
        q_pos(float(kv_len - 1)) {}

  // qk is the dot product of the pre-scaled q with k at row j.
  ATTNJIT_DEVICE float logit(float qk, int j) const {
    if (kFoldScaleIntoQ) return qk;
    float x = qk;
    if (kAlibi) x = fmaf(alibi_slope, float(j) - q_pos, x);
    if (SoftCap) x = soft_cap * tanhf(x * rcp_soft_cap);
    return x * kLog2e;
  }
};

}  // namespace attnjit

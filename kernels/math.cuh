// Scalar helpers used by the softmax and the attention variants.
#pragma once
#include "platform.cuh"

namespace attnjit {

constexpr float kLog2e = 1.4426950408889634f;
ATTNJIT_DEVICE float neg_inf() { return __int_as_float(0xff800000u); }

ATTNJIT_DEVICE float ptx_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

ATTNJIT_DEVICE float ptx_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^(x - m) where m is a running max that may still be -inf (nothing seen):
// then every weight is 0, not NaN.
ATTNJIT_DEVICE float exp2_rel(float x, float m) { return m == neg_inf() ? 0.f : ptx_exp2(x - m); }

template <int Width>
ATTNJIT_DEVICE float sum_over_lanes(float v) {
#pragma unroll
  for (int off = Width / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

}  // namespace attnjit

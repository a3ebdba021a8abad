// The online-softmax state of one query head over a slice of the KV sequence,
// as held by one thread: the running max m and denominator d (base 2) and the
// thread's 8-wide slice of the unnormalized output o.
//
//   o = sum_j 2^(s_j - m) v_j,   d = sum_j 2^(s_j - m),   lse = m + log2 d
#pragma once
#include "math.cuh"
#include "numeric.cuh"

namespace attnjit {

struct SoftmaxState {
  float m;
  float d;
  frag8 o;

  ATTNJIT_DEVICE void init() {
    m = neg_inf();
    d = 0.f;
    o.zero();
  }

  // Folds in N rows at once (logits s in base 2, values v), rescaling once.
  template <int N>
  ATTNJIT_DEVICE void update(const float (&s)[N], const frag8 (&v)[N]) {
    float m_new = m;
#pragma unroll
    for (int j = 0; j < N; ++j) m_new = fmaxf(m_new, s[j]);
    const float scale = exp2_rel(m, m_new);
    d *= scale;
#pragma unroll
    for (int i = 0; i < 8; ++i) o.x[i] *= scale;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float p = exp2_rel(s[j], m_new);
      d += p;
#pragma unroll
      for (int i = 0; i < 8; ++i) o.x[i] = fmaf(p, v[j].x[i], o.x[i]);
    }
    m = m_new;
  }

  // Merges another thread's state over disjoint rows of the same head.
  ATTNJIT_DEVICE void merge(float m2, float d2, const frag8& o2) {
    const float m_new = fmaxf(m, m2);
    const float a = exp2_rel(m, m_new), b = exp2_rel(m2, m_new);
    d = d * a + d2 * b;
#pragma unroll
    for (int i = 0; i < 8; ++i) o.x[i] = o.x[i] * a + o2.x[i] * b;
    m = m_new;
  }

  // An attention sink: a logit (base 2) in the denominator with no value.
  ATTNJIT_DEVICE void add_sink(float logit) {
    frag8 none;
    none.zero();
    merge(logit, 1.f, none);
  }

  // Merges the state held by the lane `offset` away (xor), for tree reductions.
  ATTNJIT_DEVICE void merge_lane_xor(int offset) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float d2 = __shfl_xor_sync(0xffffffffu, d, offset);
    frag8 o2;
#pragma unroll
    for (int i = 0; i < 8; ++i) o2.x[i] = __shfl_xor_sync(0xffffffffu, o.x[i], offset);
    merge(m2, d2, o2);
  }

  ATTNJIT_DEVICE frag8 normalized() const {
    const float r = d > 0.f ? 1.f / d : 0.f;
    frag8 out;
#pragma unroll
    for (int i = 0; i < 8; ++i) out.x[i] = o.x[i] * r;
    return out;
  }
  ATTNJIT_DEVICE float lse() const { return d > 0.f ? m + ptx_log2(d) : neg_inf(); }
};

}  // namespace attnjit

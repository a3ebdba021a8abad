// Positional encodings applied inside attention: rotary (LLaMA style,
// rotate-half pairing d <-> d + D/2) and ALiBi slopes.
#pragma once
#include "math.cuh"
#include "numeric.cuh"

namespace attnjit {

// The tensor cores' operand type for Q K^T. RoPE computes the rotated q and
// k in float; bf16 ones go to the tensor cores as f16 (11 mantissa bits, not
// 8): rounding them to bf16 cost up to ~3e-2 of lse at 30k keys (bf16, |q|,
// |k| <= 4; float64 simulation), f16 ~4e-3, at the same product speed. The
// price is f16's range: rotated values past 65504 (|q|, |k| > ~46000, far
// beyond attention activations) would overflow. P V stays in the input type.
template <class T, bool Rotated>
struct RopeQKType {
  using type = T;
};
template <>
struct RopeQKType<bf16, true> {
  using type = f16;
};

// sin and cos of a rotary angle, which reaches ~1e5 radians at long
// positions: a Cody-Waite reduction by 2*pi to [-pi, pi], then the hardware
// approximations, accurate there to ~1e-6. (sincosf's slow path for large
// arguments made every RoPE kernel several times larger and slower to compile.)
ATTNJIT_DEVICE void rotary_sincos(float angle, float* s, float* c) {
  const float k = rintf(angle * 0.159154943091895f);  // angle / (2 pi)
  float r = fmaf(-k, 6.28318548202514648f, angle);    // 2 pi rounded to float ...
  r = fmaf(-k, -1.7484556e-7f, r);                    // ... and what that rounding left out
  __sincosf(r, s, c);
}

// The rotation frequency of dim `dim` (its pair's, d <-> d + D/2), in radians per position.
template <int HeadDim>
ATTNJIT_DEVICE float rotary_inv_freq(int dim, float rcp_scale, float log2_theta) {
  const int pair = dim % (HeadDim / 2);
  return rcp_scale * exp2f(-log2_theta * float(2 * pair) / float(HeadDim));
}

// The rotation partner of a thread's 8-wide slice: the same row's slice
// D/2 dims on, or back, held by the lane partner_lane_xor away.
ATTNJIT_DEVICE frag8 partner_slice(const frag8& x, int partner_lane_xor) {
  frag8 partner;
#pragma unroll
  for (int i = 0; i < 8; ++i) partner.x[i] = __shfl_xor_sync(0xffffffffu, x.x[i], partner_lane_xor);
  return partner;
}

// Rotates a thread's 8-wide slice x of a head vector at position `pos`. The
// slice starts at dim0; its rotation partner (dim0 +- D/2) lives in the lane
// `partner_lane_xor` away, which holds the matching slice of the same row.
template <int HeadDim>
ATTNJIT_DEVICE void rope_llama(frag8& x, int dim0, float pos, int partner_lane_xor, float rcp_scale,
                               float log2_theta) {
  const frag8 partner = partner_slice(x, partner_lane_xor);
  const bool first_half = dim0 < HeadDim / 2;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float s, c;
    rotary_sincos(pos * rotary_inv_freq<HeadDim>(dim0 + i, rcp_scale, log2_theta), &s, &c);
    x.x[i] = first_half ? x.x[i] * c - partner.x[i] * s : x.x[i] * c + partner.x[i] * s;
  }
}

// The rotations of one thread's 8-wide slice (from dim0) at positions
// pos0, pos0 + step, pos0 + 2 step, ...: the rows a thread stages pass by
// pass. Only the first angle and the step go through rotary_sincos; each
// next angle's sine and cosine follow from the last ones by the angle-sum
// identities, four FMAs per dim instead of a range reduction and two MUFU
// ops (this per-element work, not DRAM, bounds the RoPE decode loop:
// docs/PERFORMANCE.md).
// Both sines carry the rotation's sign for this half of the head
// (x' = x cos -+ partner sin; the identities keep the sign), so a rotation
// is one multiply and one FMA. Each step adds a few 1e-7 to the sine and
// cosine; a walk covers one tile (8-16 steps) and restarts from a fresh sincos.
// Width < 8 walks part of the slice (elements Lo .. Lo + Width of x, dims
// dim0 ..): fewer registers, for a skeleton's register-starved producer.
template <int HeadDim, int Width = 8>
struct RotaryWalk {
  float c[Width], s[Width];            // cos and signed sin at the current position
  float step_c[Width], step_s[Width];  // of the step (step_s signed alike)

  ATTNJIT_DEVICE RotaryWalk(int dim0, float pos0, float step, float rcp_scale, float log2_theta) {
    const float sign = dim0 < HeadDim / 2 ? -1.f : 1.f;  // the first half subtracts its partner
#pragma unroll
    for (int i = 0; i < Width; ++i) {
      const float inv_freq = rotary_inv_freq<HeadDim>(dim0 + i, rcp_scale, log2_theta);
      rotary_sincos(pos0 * inv_freq, &s[i], &c[i]);
      rotary_sincos(step * inv_freq, &step_s[i], &step_c[i]);
      s[i] *= sign;
      step_s[i] *= sign;
    }
  }

  // Rotates x, the slice at the current position (its partner slice in the
  // lane partner_lane_xor away, at the same position), then steps on:
  // cos(a + d) = cos a cos d - sin a sin d, sin(a + d) = sin a cos d + cos a sin d,
  // the sign squared away in the first.
  template <int Lo = 0>
  ATTNJIT_DEVICE void rotate_and_step(frag8& x, int partner_lane_xor) {
    static_assert(Lo >= 0 && Lo + Width <= 8, "within the 8-wide slice");
    float partner[Width];
#pragma unroll
    for (int i = 0; i < Width; ++i) partner[i] = __shfl_xor_sync(0xffffffffu, x.x[Lo + i], partner_lane_xor);
#pragma unroll
    for (int i = 0; i < Width; ++i) {
      x.x[Lo + i] = fmaf(partner[i], s[i], x.x[Lo + i] * c[i]);
      const float next_c = fmaf(-s[i], step_s[i], c[i] * step_c[i]);
      s[i] = fmaf(c[i], step_s[i], s[i] * step_c[i]);
      c[i] = next_c;
    }
  }
};

// A variant without a positional rotation walks nowhere.
struct NoRotation {
  template <int Lo = 0>
  ATTNJIT_DEVICE void rotate_and_step(frag8& /*x*/, int /*partner_lane_xor*/) {}
};

// ALiBi slope of head h among num_heads (Press et al.; the same geometric
// sequence FlashInfer and the reference implementations use).
ATTNJIT_DEVICE float alibi_slope(int h, int num_heads) {
  int n = 1;
  while (2 * n <= num_heads) n *= 2;
  return h < n ? exp2f(-8.f * float(h + 1) / float(n)) : exp2f(-4.f * float(2 * (h - n) + 1) / float(n));
}

}  // namespace attnjit

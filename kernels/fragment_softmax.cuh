// Online softmax on tensor-core accumulator fragments (mma.cuh): verbs on a
// 16 x 8N tile of logits S held as N m16n8 fragments, and on the running
// state of the two rows each thread holds (g and g + 8 with g = lane / 4;
// element i of a fragment is in row half i / 2, column 2t + i % 2 of its
// n-tile with t = lane % 4). A row's columns are spread over the four lanes
// of a quad, so maxima are reduced across the quad at once; sums either only
// at the end (exp2_and_sum, finalize) or on the tensor cores (exp2, then
// row_sums_mma per P fragment). Per tile, in base 2:
//
//   m' = max(m, rowmax S)      scale = 2^(m - m')      O *= scale, d *= scale
//   P = 2^(S - m')             d += rowsum P           O += P V
//
// Used by the tensor-core prefill skeletons; decode, with few query rows,
// runs key-major (key_major_softmax.cuh).
#pragma once
#include "math.cuh"
#include "mma.cuh"

namespace attnjit {

// Applies f(row_half, column, x) -> x' to every element of S, column counted
// from the tile's first (0 .. 8N).
template <int N, class F>
ATTNJIT_DEVICE void map_tile(frag_c (&s)[N], F&& f) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int n = 0; n < N; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) s[n].x[i] = f(i >> 1, n * 8 + 2 * t + (i & 1), s[n].x[i]);
  }
}

// The maximum of each of the thread's two rows over the whole tile (all of
// the quad's columns).
template <int N>
ATTNJIT_DEVICE void row_max(const frag_c (&s)[N], float (&mx)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(s[0].x[2 * h], s[0].x[2 * h + 1]);
#pragma unroll
    for (int n = 1; n < N; ++n) mx[h] = fmaxf(mx[h], fmaxf(s[n].x[2 * h], s[n].x[2 * h + 1]));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
  }
}

// Multiplies each row of an accumulator (O) by its factor. Once the running
// maxima settle, a tile rarely raises any row's max, and every factor is
// exactly 1 (2^0): then the warp skips the multiplies, which in prefill were
// more instructions than the MMAs. Call from warp-uniform code: the vote
// needs every lane.
template <int N>
ATTNJIT_DEVICE void rescale(frag_c (&o)[N], const float (&scale)[2]) {
  if (!__any_sync(0xffffffffu, scale[0] != 1.f || scale[1] != 1.f)) return;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    o[n].x[0] *= scale[0];
    o[n].x[1] *= scale[0];
    o[n].x[2] *= scale[1];
    o[n].x[3] *= scale[1];
  }
}

// Two 8-column n-tiles of P (columns 16k .. 16k + 15) as the A operand of
// the next product (rows x those 16 k), in the 16-bit type T.
template <class T>
ATTNJIT_DEVICE frag_a to_a_fragment(const frag_c& lo, const frag_c& hi) {
  frag_a a;
  a.x[0] = pack2<T>(lo.x[0], lo.x[1]);
  a.x[1] = pack2<T>(lo.x[2], lo.x[3]);
  a.x[2] = pack2<T>(hi.x[0], hi.x[1]);
  a.x[3] = pack2<T>(hi.x[2], hi.x[3]);
  return a;
}

// Four n-tiles of P (columns 32k .. 32k + 31) as the e4m3 A operand of an
// fp8 product (m64nNk32), packed inside the thread: its A fragment wants
// columns 4t .. 4t + 3 and 16 + 4t .. (rows g and g + 8, word by word),
// the accumulators hold 2t, 2t + 1 of each n-tile, so the product runs over
// the keys in the order
//   slot 4t + i  <-  key 2t + (i & 1) + 8 (i >> 1),   slot 16 + 4t + i  <-  16 + the same,
// and V's rows must come in that order too (the producer transposes V into
// it: prefill_sm90_ws.cuh). P in [0, 1] rounds to nearest, saturating.
ATTNJIT_DEVICE uint32_t pack4_e4m3(float x0, float x1, float x2, float x3) {
  uint32_t r;  // cvt's first source goes to the high byte
  asm("{\n.reg .b16 lo, hi;\ncvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\ncvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}"
      : "=r"(r)
      : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
  return r;
}
ATTNJIT_DEVICE frag_a to_a_fragment_e4m3(const frag_c& s0, const frag_c& s1, const frag_c& s2, const frag_c& s3) {
  frag_a a;
  a.x[0] = pack4_e4m3(s0.x[0], s0.x[1], s1.x[0], s1.x[1]);
  a.x[1] = pack4_e4m3(s0.x[2], s0.x[3], s1.x[2], s1.x[3]);
  a.x[2] = pack4_e4m3(s2.x[0], s2.x[1], s3.x[0], s3.x[1]);
  a.x[3] = pack4_e4m3(s2.x[2], s2.x[3], s3.x[2], s3.x[3]);
  return a;
}

// The row sums of a 16 x 16 A fragment (P), added to c: P times a 16 x 8
// block of ones, so every column of c is the sum of its row over all 16
// columns, the quad's included (x[0], x[1]: row g; x[2], x[3]: row g + 8).
// One MMA per 16 keys instead of 16 dependent FADDs per row and lane, and
// the denominator sums the same rounded P that multiplies V (FlashInfer
// sums its rows the same way).
template <class T>
ATTNJIT_DEVICE void row_sums_mma(frag_c& c, const frag_a& p) {
  const uint32_t one2 = pack2<T>(1.f, 1.f);
  mma_16816<T>(c, p, frag_b{{one2, one2}});
}

// Running max and denominator of the thread's two rows. After exp2_and_sum,
// d holds only this thread's columns until finalize() adds up the quad; a
// caller that sums on the tensor cores (exp2, row_sums_mma, add_row_sums)
// holds whole rows and skips finalize().
struct RowState {
  float m[2], d[2];

  ATTNJIT_DEVICE void init() {
    m[0] = m[1] = neg_inf();
    d[0] = d[1] = 0.f;
  }

  // Raises the running max to include a tile's row maxima (in the units of
  // the scores, which `scale` turns into base-2 logits); returns the factor
  // 2^(m - m') by which what was accumulated shrinks (d here, O by the caller
  // through rescale()).
  ATTNJIT_DEVICE void raise_max(const float (&tile_max)[2], float (&shrink)[2], float scale = 1.f) {
    const float both[2] = {scale, scale};
    raise_max(tile_max, shrink, both);
  }
  // The same with a scale per row (fp8: each row's query head has its own).
  ATTNJIT_DEVICE void raise_max(const float (&tile_max)[2], float (&shrink)[2], const float (&scale)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_new = fmaxf(m[h], tile_max[h] * scale[h]);
      shrink[h] = exp2_rel(m[h], m_new);
      m[h] = m_new;
      d[h] *= shrink[h];
    }
  }

  // S (scores; logits = scale * S, scale > 0) becomes P = 2^(scale S - m) in
  // place: one FFMA and one ex2 per element. Masked -inf scores give 0; so
  // does a row that has seen nothing but them (m is still -inf, the exponent
  // -inf - 0). Its row sums are the caller's: exp2_and_sum, or the tensor
  // cores (row_sums_mma, add_row_sums).
  template <int N>
  ATTNJIT_DEVICE void exp2(frag_c (&s)[N], float scale = 1.f) {
#pragma unroll
    for (int n = 0; n < N; ++n) exp2(s[n], scale);
  }
  // The same for one n-tile: a caller that converts P a k-step at a time
  // (prefill) takes each k-step's exponentials just before its MMAs, so the
  // scheduler overlaps them with the previous k-step's (ex2 has its own
  // pipe; issued 64 in a row it stalled the warp, ncu).
  ATTNJIT_DEVICE void exp2(frag_c& s, float scale = 1.f) {
    const float both[2] = {scale, scale};
    exp2(s, both);
  }
  ATTNJIT_DEVICE void exp2(frag_c& s, const float (&scale)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float neg_m = m[h] == neg_inf() ? 0.f : -m[h];
#pragma unroll
      for (int c = 0; c < 2; ++c) s.x[2 * h + c] = ptx_exp2(fmaf(s.x[2 * h + c], scale[h], neg_m));
    }
  }
  // exp2, then P's row sums over this thread's columns join d.
  template <int N>
  ATTNJIT_DEVICE void exp2_and_sum(frag_c (&s)[N], float scale = 1.f) {
    const float both[2] = {scale, scale};
    exp2_and_sum(s, both);
  }
  template <int N>
  ATTNJIT_DEVICE void exp2_and_sum(frag_c (&s)[N], const float (&scale)[2]) {
#pragma unroll
    for (int n = 0; n < N; ++n) exp2(s[n], scale);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int n = 0; n < N; ++n) {
#pragma unroll
        for (int c = 0; c < 2; ++c) d[h] += s[n].x[2 * h + c];
      }
    }
  }
  // Whole-row sums (row_sums_mma's accumulator) join d.
  ATTNJIT_DEVICE void add_row_sums(const frag_c& sums) {
    d[0] += sums.x[0];
    d[1] += sums.x[2];
  }

  // Adds up the row sums across the quad; every lane of it ends with the total.
  ATTNJIT_DEVICE void finalize() {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      d[h] += __shfl_xor_sync(0xffffffffu, d[h], 1);
      d[h] += __shfl_xor_sync(0xffffffffu, d[h], 2);
    }
  }
};

}  // namespace attnjit

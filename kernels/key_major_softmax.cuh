// Online softmax on key-major tensor-core tiles: S^T = K Q^T, the keys as
// the 16-row M dimension and the query rows as the 8-column N dimension of
// mma.m16n8k16 (mma.cuh), for decode, whose few query rows (a GQA group)
// would otherwise pad a 16-row M (fragment_softmax.cuh's query-major form).
//
// A tile is KT x NT fragments: KT m-tiles of 16 keys, NT n-tiles of 8 query
// rows. Element i of a fragment is key g + 8 (i / 2) of its m-tile and query
// row 2t + i % 2 of its n-tile (g = lane / 4, t = lane % 4), so a thread
// holds two query rows per n-tile, and the eight lanes that share t hold
// every key of them: maxima reduce across those lanes (xor 4, 8, 16), sums
// only at the end (finalize). The output is kept transposed too,
// O^T = V^T P^T (head-dim rows x query columns), in the same columns, so a
// row's rescale needs no other lane. Per tile, in base 2:
//
//   m' = max(m, colmax S^T)   scale = 2^(m - m')   O^T *= scale, d *= scale
//   P^T = 2^(S^T - m')        d += colsum P^T      O^T += V^T P^T
#pragma once
#include "math.cuh"
#include "mma.cuh"

namespace attnjit {

// Applies f(n, c, key, x) -> x' to every element: query row 8n + 2t + c of
// the thread's, key counted from the tile's first (0 .. 16 KT).
template <int KT, int NT, class F>
ATTNJIT_DEVICE void map_key_major(frag_c (&s)[KT][NT], F&& f) {
  const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int k = 0; k < KT; ++k) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) s[k][n].x[i] = f(n, i & 1, 16 * k + g + 8 * (i >> 1), s[k][n].x[i]);
    }
  }
}

// P^T's m-tile (16 keys x 8 query rows, a C fragment) as the B operand of
// O^T += V^T P^T (k = the 16 keys, n = the 8 rows): each 8 x 8 half, packed
// to T, is transposed across the warp (movmatrix), which puts key pairs
// where query rows were.
template <class T>
ATTNJIT_DEVICE frag_b to_b_fragment(const frag_c& p) {
  return frag_b{{movmatrix_trans(pack2<T>(p.x[0], p.x[1])), movmatrix_trans(pack2<T>(p.x[2], p.x[3]))}};
}

// Running max and denominator of the thread's 2 NT query rows (columns).
// Between finalize() calls d holds only this thread's keys.
template <int NT>
struct QueryColumns {
  float m[NT][2], d[NT][2];

  ATTNJIT_DEVICE void init() {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      m[n][0] = m[n][1] = neg_inf();
      d[n][0] = d[n][1] = 0.f;
    }
  }

  // Raises each row's max to include the tile's keys; returns the factor
  // 2^(m - m') by which what was accumulated shrinks (d here, O^T by rescale).
  template <int KT>
  ATTNJIT_DEVICE void raise_max(const frag_c (&s)[KT][NT], float (&shrink)[NT][2]) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float mx = fmaxf(s[0][n].x[c], s[0][n].x[2 + c]);
#pragma unroll
        for (int k = 1; k < KT; ++k) mx = fmaxf(mx, fmaxf(s[k][n].x[c], s[k][n].x[2 + c]));
#pragma unroll
        for (int lanes = 4; lanes < 32; lanes *= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, lanes));
        const float m_new = fmaxf(m[n][c], mx);
        shrink[n][c] = exp2_rel(m[n][c], m_new);
        m[n][c] = m_new;
        d[n][c] *= shrink[n][c];
      }
    }
  }

  // S^T (base-2 logits) becomes P^T = 2^(S^T - m) in place; the thread's
  // keys join d. A row that has seen only masked keys (m still -inf) gives 0.
  template <int KT>
  ATTNJIT_DEVICE void exp2_and_sum(frag_c (&s)[KT][NT]) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float neg_m = m[n][c] == neg_inf() ? 0.f : -m[n][c];
#pragma unroll
        for (int k = 0; k < KT; ++k) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float& x = s[k][n].x[2 * h + c];
            x = ptx_exp2(x + neg_m);
            d[n][c] += x;
          }
        }
      }
    }
  }

  // Multiplies the columns of O^T (MD m-tiles of head-dim rows) by their
  // factors; skipped when every factor is 1, as a tile that raises no max
  // mostly is. Call from warp-uniform code: the vote needs every lane.
  template <int MD>
  ATTNJIT_DEVICE void rescale(frag_c (&o)[MD][NT], const float (&shrink)[NT][2]) const {
    bool any = false;
#pragma unroll
    for (int n = 0; n < NT; ++n) any |= shrink[n][0] != 1.f || shrink[n][1] != 1.f;
    if (!__any_sync(0xffffffffu, any)) return;
#pragma unroll
    for (int md = 0; md < MD; ++md) {
#pragma unroll
      for (int n = 0; n < NT; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) o[md][n].x[i] *= shrink[n][i & 1];
      }
    }
  }

  // Adds up each row's sum across the eight lanes holding its keys.
  ATTNJIT_DEVICE void finalize() {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
#pragma unroll
        for (int lanes = 4; lanes < 32; lanes *= 2) d[n][c] += __shfl_xor_sync(0xffffffffu, d[n][c], lanes);
      }
    }
  }
};

}  // namespace attnjit

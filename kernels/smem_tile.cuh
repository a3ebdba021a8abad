// A tile of 16-bit elements in shared memory, HeadDim columns per row, rows
// padded by 8 elements so that the eight rows an ldmatrix phase reads fall in
// distinct banks. Its verbs hand out the mma.m16n8k16 operands (mma.cuh):
//
//   a_fragment(row0, k0)            rows row0..+15, columns k0..+15 as A (M x K)      Q
//   b_fragments_nk(row0, k0)        rows row0..+15 as N, columns k0..+15 as K: B = T^T  K in S = Q K^T
//   b_fragments_kn(k0, n0)          rows k0..+15 as K, columns n0..+15 as N: B = T      V in O = P V
//
// The b verbs return two n8 fragments (16 columns of the product). The tile
// holds its shared-window address (mma.cuh: smem_addr), so every address it
// hands out is 32-bit arithmetic.
#pragma once
#include "mma.cuh"
#include "numeric.cuh"

namespace attnjit {

template <int HeadDim>
struct SmemTile {
  static constexpr int kStride = HeadDim + 8;  // elements
  static constexpr int kRowBytes = kStride * 2;
  uint32_t base;

  ATTNJIT_DEVICE uint32_t at(int row, int col) const { return base + offset(row, col); }
  static ATTNJIT_DEVICE uint32_t offset(int row, int col) { return row * kRowBytes + col * 2; }

  // A fragment's address is the lane's offset (the row and 16-byte half it
  // points ldmatrix at) plus the fragment's own (row, column) offset, an
  // immediate in the instruction. For V the lane's offset goes through
  // opaque(): otherwise the compiler, knowing its bits, turns "+ column
  // offset" into an OR, which ptxas cannot fold into the immediate, and keeps
  // one address register per 16 columns (ptxas at d128 prefill: eight,
  // rebuilt every KV tile; the spills went with them). Q's and K's offsets
  // fold as they are; hiding them too gained nothing.
  ATTNJIT_DEVICE frag_a a_fragment(int row0, int k0) const {
    const int lane = threadIdx.x & 31;
    frag_a a;
    ldmatrix_x4(a.x, base + offset(lane & 15, (lane >> 4) * 8) + offset(row0, k0));
    return a;
  }
  ATTNJIT_DEVICE void b_fragments_nk(frag_b& lo, frag_b& hi, int row0, int k0) const {
    const int lane = threadIdx.x & 31;
    uint32_t r[4];
    ldmatrix_x4(r, base + offset((lane & 7) + ((lane >> 4) << 3), ((lane >> 3) & 1) * 8) + offset(row0, k0));
    lo = frag_b{{r[0], r[1]}};
    hi = frag_b{{r[2], r[3]}};
  }
  ATTNJIT_DEVICE void b_fragments_kn(frag_b& lo, frag_b& hi, int k0, int n0) const {
    const int lane = threadIdx.x & 31;
    uint32_t r[4];
    ldmatrix_x4_trans(r, base + opaque(offset(lane & 15, (lane >> 4) * 8)) + offset(k0, n0));
    lo = frag_b{{r[0], r[1]}};
    hi = frag_b{{r[2], r[3]}};
  }
};

}  // namespace attnjit

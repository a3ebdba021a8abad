// Tensor-core fragments for mma.sync.m16n8k16 (sm_80+), f32 accumulators.
//
// With g = lane / 4 and t = lane % 4, a thread holds:
//   A (16x16, row-major): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16x8, k-major):    b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C (16x8):             c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1]
// ldmatrix gives A and B fragments straight from shared memory: for B = K^T
// (K rows in smem) without transpose, for B = V (rows = k) with .trans.
#pragma once
#include "numeric.cuh"

namespace attnjit {

struct frag_a { uint32_t x[4]; };
struct frag_b { uint32_t x[2]; };
struct frag_c {
  float x[4];
  ATTNJIT_DEVICE void zero() { x[0] = x[1] = x[2] = x[3] = 0.f; }
};

// Shared memory is addressed by its 32-bit shared-window address (uint32_t)
// wherever a kernel computes addresses per tile: arithmetic on generic
// pointers stays 64-bit until the conversion, and NVRTC (unlike nvcc) does
// not fold it back (ptxas at d128 prefill: 153 IADD3 per KV tile against 63).
ATTNJIT_DEVICE uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// x, hidden from the optimizer: what it cannot see into it cannot rewrite
// (non-volatile, so equal calls still merge).
ATTNJIT_DEVICE uint32_t opaque(uint32_t x) {
  uint32_t y;
  asm("mov.b32 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// Four 8x8 16-bit matrices; lane i supplies the row address for matrix i / 8.
ATTNJIT_DEVICE void ldmatrix_x4(uint32_t (&r)[4], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row));
}
// Two: lanes 0-15 supply the row addresses (the others' are ignored).
ATTNJIT_DEVICE void ldmatrix_x2(uint32_t (&r)[2], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(row));
}
ATTNJIT_DEVICE void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row));
}

// The transpose of an 8x8 16-bit matrix held as a fragment (lane holds row
// lane / 4, columns 2 (lane % 4) .. +1, one 32-bit pair), in registers.
ATTNJIT_DEVICE uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// 4 and 16 bytes at a shared-window address.
ATTNJIT_DEVICE void st_shared_u32(uint32_t addr, uint32_t x) { asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(x)); }
ATTNJIT_DEVICE void st_shared_v4(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d));
}
ATTNJIT_DEVICE uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t x;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(x) : "r"(addr));
  return x;
}
ATTNJIT_DEVICE uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

// c += a * b for 16-bit inputs of type T (f16 or bf16).
template <class T> ATTNJIT_DEVICE void mma_16816(frag_c& c, const frag_a& a, const frag_b& b);

template <> ATTNJIT_DEVICE void mma_16816<f16>(frag_c& c, const frag_a& a, const frag_b& b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3])
               : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
}
template <> ATTNJIT_DEVICE void mma_16816<bf16>(frag_c& c, const frag_a& a, const frag_b& b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3])
               : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
}

// A 16-column block of B (lo: its columns 0-7, hi: 8-15) into accumulators
// 2 * n16 and 2 * n16 + 1 of each of a warp's FM 16-row fragments of A.
template <class T, int FM, int N>
ATTNJIT_DEVICE void mma_16816_rows(frag_c (&c)[FM][N], int n16, const frag_a (&a)[FM], const frag_b& lo,
                                   const frag_b& hi) {
#pragma unroll
  for (int m = 0; m < FM; ++m) {
    mma_16816<T>(c[m][2 * n16], a[m], lo);
    mma_16816<T>(c[m][2 * n16 + 1], a[m], hi);
  }
}

// Two floats packed as one 32-bit pair of T (low element first).
template <class T> ATTNJIT_DEVICE uint32_t pack2(float lo, float hi);
template <> ATTNJIT_DEVICE uint32_t pack2<f16>(float lo, float hi) { return detail::f32_to_f16x2(lo, hi); }
template <> ATTNJIT_DEVICE uint32_t pack2<bf16>(float lo, float hi) { return detail::f32_to_bf16x2(lo, hi); }

// x as hi + lo, both in T: hi = x rounded to T, lo = the rest rounded to T.
// Products of two such pairs on the tensor cores (hi*hi + lo*hi + hi*lo, in
// f32) keep about twice T's mantissa bits: how a skeleton whose operands were
// computed in float (RoPE) keeps their precision.
template <class T>
struct split8 {
  raw8<T> hi, lo;
  ATTNJIT_DEVICE explicit split8(const frag8& x) {
#pragma unroll
    for (int i = 0; i < 4; ++i) hi.r[i] = pack2<T>(x.x[2 * i], x.x[2 * i + 1]);
    const frag8 h = to_frag8(hi);
#pragma unroll
    for (int i = 0; i < 4; ++i) lo.r[i] = pack2<T>(x.x[2 * i] - h.x[2 * i], x.x[2 * i + 1] - h.x[2 * i + 1]);
  }
};

// Eight floats as 16 bytes of T, for staging tiles in shared memory.
template <class T>
ATTNJIT_DEVICE void store_smem8(uint32_t addr, const frag8& f) {
  st_shared_v4(addr, pack2<T>(f.x[0], f.x[1]), pack2<T>(f.x[2], f.x[3]), pack2<T>(f.x[4], f.x[5]),
               pack2<T>(f.x[6], f.x[7]));
}

// Eight elements of type T from 16 bytes of shared memory, as floats.
template <class T>
ATTNJIT_DEVICE frag8 load_smem8(uint32_t addr) {
  raw8<T> x;
  const uint4 v = ld_shared_v4(addr);
  x.r[0] = v.x;
  x.r[1] = v.y;
  x.r[2] = v.z;
  x.r[3] = v.w;
  return to_frag8(x);
}

// Eight elements already in a 16-bit type (widen8), 16 bytes to shared memory.
template <class T>
ATTNJIT_DEVICE void store_smem8(uint32_t addr, const raw8<T>& x) {
  static_assert(storage_bytes<T>::value == 2, "shared-memory tiles hold the MMA's 16-bit type");
  st_shared_v4(addr, x.r[0], x.r[1], x.r[2], x.r[3]);
}

}  // namespace attnjit

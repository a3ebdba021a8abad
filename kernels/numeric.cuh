// Storage types of attention operands and their conversions to and from
// float, written with PTX so no cuda_fp16.h / cuda_bf16.h is needed.
// Every type moves in fragments of 8 elements: 16 bytes for 16-bit types,
// 8 bytes for fp8, which keeps global loads wide and coalesced.
#pragma once
#include "platform.cuh"

namespace attnjit {

struct f16 {};
struct bf16 {};
struct e4m3 {};
struct e5m2 {};
struct f32 {};

// What <type_traits> would give (NVRTC compiles without the standard library).
template <class A, class B> struct is_same_type { static constexpr bool value = false; };
template <class A> struct is_same_type<A, A> { static constexpr bool value = true; };
template <bool C, class A, class B> struct conditional_type { using type = A; };
template <class A, class B> struct conditional_type<false, A, B> { using type = B; };

template <class T> struct storage_bytes;
template <> struct storage_bytes<f16> { static constexpr int value = 2; };
template <> struct storage_bytes<bf16> { static constexpr int value = 2; };
template <> struct storage_bytes<e4m3> { static constexpr int value = 1; };
template <> struct storage_bytes<e5m2> { static constexpr int value = 1; };
template <> struct storage_bytes<f32> { static constexpr int value = 4; };

// Eight values in float registers: the unit every kernel computes on.
struct frag8 {
  float x[8];
  ATTNJIT_DEVICE void zero() {
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = 0.f;
  }
};

namespace detail {

// Streaming loads: the KV cache is read once, so keep it out of L1.
ATTNJIT_DEVICE void ld_stream_16(const void* p, uint32_t (&r)[4]) {
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "l"(p));
}
ATTNJIT_DEVICE void ld_stream_8(const void* p, uint32_t (&r)[2]) {
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "l"(p));
}

ATTNJIT_DEVICE void f16x2_to_f32(uint32_t v, float& lo, float& hi) {
  asm("{ .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h; }"
      : "=f"(lo), "=f"(hi) : "r"(v));
}
ATTNJIT_DEVICE void bf16x2_to_f32(uint32_t v, float& lo, float& hi) {
  lo = __uint_as_float(v << 16);
  hi = __uint_as_float(v & 0xffff0000u);
}
ATTNJIT_DEVICE uint32_t f32_to_f16x2(float lo, float hi) {
  uint32_t r;
  asm("{ .reg .f16 l, h;\n cvt.rn.f16.f32 l, %1;\n cvt.rn.f16.f32 h, %2;\n mov.b32 %0, {l, h}; }"
      : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}
ATTNJIT_DEVICE uint32_t f32_to_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}

// Four fp8 values (the bytes of v, lowest first) widened exactly to f16, as
// two f16x2 words (elements 0,1 and 2,3; the lower element in the low half).
// e5m2 is the top byte of an f16: one byte permute per word. e4m3 has a
// hardware conversion from sm_89 on (two values per instruction). Before
// that, e4m3 (bias 7) placed in f16's field (bias 15) reads as value * 2^-8,
// subnormals included, and one f16x2 multiply by 256 restores it exactly.
// (e4m3's single NaN encoding is not reproduced on that path: calibrated KV
// caches hold none.)
ATTNJIT_DEVICE uint32_t byte_perm(uint32_t a, uint32_t selector) {
  uint32_t r;
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(a), "r"(selector));
  return r;
}
// Bytes of the pair {b, a} (b the high word) picked by the selector's nibbles.
ATTNJIT_DEVICE uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
  return r;
}
ATTNJIT_DEVICE void fp8x4_to_f16x2(e5m2, uint32_t v, uint32_t& lo, uint32_t& hi) {
  lo = byte_perm(v, 0x1404);  // bytes 0, 1 -> the high bytes of two f16
  hi = byte_perm(v, 0x3424);
}
ATTNJIT_DEVICE void fp8x4_to_f16x2(e4m3, uint32_t v, uint32_t& lo, uint32_t& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{ .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h; }"
      : "=r"(lo), "=r"(hi) : "r"(v));
#else
  uint32_t w[2] = {byte_perm(v, 0x1404), byte_perm(v, 0x3424)};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t bits = (w[i] & 0x80008000u) | ((w[i] >> 1) & 0x3f803f80u);  // sign | exponent, mantissa >> 1
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(w[i]) : "r"(bits), "r"(0x5c005c00u));  // * 256 (exact)
  }
  lo = w[0];
  hi = w[1];
#endif
}

}  // namespace detail

// raw8<T>: eight elements of T as loaded, not yet converted: 16 bytes for
// 16-bit types, 8 for fp8. Kernels prefetch in this form, which costs half
// the registers of the float fragment, and convert just before use.
template <class T>
struct raw8 {
  uint32_t r[2 * storage_bytes<T>::value];
};

template <class T>
ATTNJIT_DEVICE raw8<T> load_raw8(const void* p) {
  raw8<T> x;
  if (storage_bytes<T>::value == 2) {
    detail::ld_stream_16(p, reinterpret_cast<uint32_t(&)[4]>(x.r));
  } else {
    detail::ld_stream_8(p, reinterpret_cast<uint32_t(&)[2]>(x.r));
  }
  return x;
}

// Sixteen bytes of T at p: one raw8 of a 16-bit type, two of fp8 (elements
// 0-7 and 8-15), so a kernel can keep its loads 16 bytes wide for any type.
template <class T>
ATTNJIT_DEVICE void load_raw16(const void* p, raw8<T> (&x)[2 / storage_bytes<T>::value]) {
  uint32_t r[4];
  detail::ld_stream_16(p, r);
  constexpr int kWords = 2 * storage_bytes<T>::value;
#pragma unroll
  for (int i = 0; i < 4; ++i) x[i / kWords].r[i % kWords] = r[i];
}

ATTNJIT_DEVICE frag8 to_frag8(const raw8<f16>& x) {
  frag8 f;
#pragma unroll
  for (int i = 0; i < 4; ++i) detail::f16x2_to_f32(x.r[i], f.x[2 * i], f.x[2 * i + 1]);
  return f;
}
ATTNJIT_DEVICE frag8 to_frag8(const raw8<bf16>& x) {
  frag8 f;
#pragma unroll
  for (int i = 0; i < 4; ++i) detail::bf16x2_to_f32(x.r[i], f.x[2 * i], f.x[2 * i + 1]);
  return f;
}
template <class FP8>
ATTNJIT_DEVICE frag8 fp8_to_frag8(const raw8<FP8>& x) {
  frag8 f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    uint32_t lo, hi;
    detail::fp8x4_to_f16x2(FP8{}, x.r[i], lo, hi);
    detail::f16x2_to_f32(lo, f.x[4 * i], f.x[4 * i + 1]);
    detail::f16x2_to_f32(hi, f.x[4 * i + 2], f.x[4 * i + 3]);
  }
  return f;
}
ATTNJIT_DEVICE frag8 to_frag8(const raw8<e5m2>& x) { return fp8_to_frag8(x); }
ATTNJIT_DEVICE frag8 to_frag8(const raw8<e4m3>& x) { return fp8_to_frag8(x); }

// The 16-bit type a tensor-core kernel computes in, given q's and the KV's
// storage types: q's own, but f16 for fp8 KV, which widens to f16 exactly
// (and bf16 q converts to f16 exactly within f16's range, |q| < 65504).
template <class Q, class KV> struct mma_input { using type = Q; };
template <class Q> struct mma_input<Q, e4m3> { using type = f16; };
template <class Q> struct mma_input<Q, e5m2> { using type = f16; };

// Eight loaded elements as eight of the MMA's 16-bit type, without going
// through float: the same bits for a 16-bit type, an exact widening for fp8.
ATTNJIT_DEVICE raw8<f16> widen8(const raw8<f16>& x) { return x; }
ATTNJIT_DEVICE raw8<bf16> widen8(const raw8<bf16>& x) { return x; }
template <class FP8>
ATTNJIT_DEVICE raw8<f16> widen8(const raw8<FP8>& x) {
  raw8<f16> w;
  detail::fp8x4_to_f16x2(FP8{}, x.r[0], w.r[0], w.r[1]);
  detail::fp8x4_to_f16x2(FP8{}, x.r[1], w.r[2], w.r[3]);
  return w;
}

// load8<T>(p): eight consecutive elements of type T at p, as floats.
template <class T>
ATTNJIT_DEVICE frag8 load8(const void* p) {
  return to_frag8(load_raw8<T>(p));
}

// store8<T>(p, f): rounds to nearest even and writes 8 elements.
template <class T> ATTNJIT_DEVICE void store8(void* p, const frag8& f);

template <> ATTNJIT_DEVICE void store8<f16>(void* p, const frag8& f) {
  uint32_t r[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) r[i] = detail::f32_to_f16x2(f.x[2 * i], f.x[2 * i + 1]);
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
}
template <> ATTNJIT_DEVICE void store8<bf16>(void* p, const frag8& f) {
  uint32_t r[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) r[i] = detail::f32_to_bf16x2(f.x[2 * i], f.x[2 * i + 1]);
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
}
template <> ATTNJIT_DEVICE void store8<f32>(void* p, const frag8& f) {
  float4* d = reinterpret_cast<float4*>(p);
  d[0] = make_float4(f.x[0], f.x[1], f.x[2], f.x[3]);
  d[1] = make_float4(f.x[4], f.x[5], f.x[6], f.x[7]);
}
// Eight floats loaded as two float4 (elements 0-3, then 4-7), as a frag8.
ATTNJIT_DEVICE frag8 frag8_of(const float4& a, const float4& b) {
  frag8 f;
  f.x[0] = a.x; f.x[1] = a.y; f.x[2] = a.z; f.x[3] = a.w;
  f.x[4] = b.x; f.x[5] = b.y; f.x[6] = b.z; f.x[7] = b.w;
  return f;
}

template <>
ATTNJIT_DEVICE frag8 load8<f32>(const void* p) {
  const float4* s = reinterpret_cast<const float4*>(p);
  return frag8_of(s[0], s[1]);
}

// Eight floats at p read at the L2 (ld.global.cg), past the SM's L1, which
// does not see other SMs' stores: states other CTAs of the grid wrote.
ATTNJIT_DEVICE frag8 load8_l2(const float* p) {
  const float4* s = reinterpret_cast<const float4*>(p);
  return frag8_of(__ldcg(s), __ldcg(s + 1));
}

}  // namespace attnjit

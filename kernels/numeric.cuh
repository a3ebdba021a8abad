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

// fp8 -> f16 by moving bits, valid on every arch. e5m2 is the top byte of an
// f16. e4m3 (bias 7) placed in f16's field (bias 15) reads as value * 2^-8,
// subnormals included, so one multiply by 256 restores it. (e4m3's single NaN
// encoding is not reproduced: calibrated KV caches hold none.)
ATTNJIT_DEVICE void e5m2x4_to_f32(uint32_t v, float* out) {
  f16x2_to_f32(((v & 0x00ffu) << 8) | ((v & 0xff00u) << 16), out[0], out[1]);
  f16x2_to_f32(((v >> 8) & 0xff00u) | (v & 0xff000000u), out[2], out[3]);
}
ATTNJIT_DEVICE void e4m3x4_to_f32(uint32_t v, float* out) {
  // byte b -> f16 bits (b & 0x80) << 8 | (b & 0x7f) << 7
  uint32_t b0 = v & 0xffu, b1 = (v >> 8) & 0xffu, b2 = (v >> 16) & 0xffu, b3 = v >> 24;
  uint32_t p01 = ((b0 & 0x80u) << 8) | ((b0 & 0x7fu) << 7) | ((((b1 & 0x80u) << 8) | ((b1 & 0x7fu) << 7)) << 16);
  uint32_t p23 = ((b2 & 0x80u) << 8) | ((b2 & 0x7fu) << 7) | ((((b3 & 0x80u) << 8) | ((b3 & 0x7fu) << 7)) << 16);
  f16x2_to_f32(p01, out[0], out[1]);
  f16x2_to_f32(p23, out[2], out[3]);
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] *= 256.f;
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
ATTNJIT_DEVICE frag8 to_frag8(const raw8<e5m2>& x) {
  frag8 f;
  detail::e5m2x4_to_f32(x.r[0], f.x);
  detail::e5m2x4_to_f32(x.r[1], f.x + 4);
  return f;
}
ATTNJIT_DEVICE frag8 to_frag8(const raw8<e4m3>& x) {
  frag8 f;
  detail::e4m3x4_to_f32(x.r[0], f.x);
  detail::e4m3x4_to_f32(x.r[1], f.x + 4);
  return f;
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
template <>
ATTNJIT_DEVICE frag8 load8<f32>(const void* p) {
  const float4* s = reinterpret_cast<const float4*>(p);
  float4 a = s[0], b = s[1];
  frag8 f;
  f.x[0] = a.x; f.x[1] = a.y; f.x[2] = a.z; f.x[3] = a.w;
  f.x[4] = b.x; f.x[5] = b.y; f.x[6] = b.z; f.x[7] = b.w;
  return f;
}

}  // namespace attnjit

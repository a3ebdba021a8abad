// Host-side encoders/decoders of the storage dtypes, so tests can make random
// inputs in any dtype and feed the reference the exact stored values.
#pragma once
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>

#include "attnjit/types.hpp"

namespace attnjit::test {

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// Round-to-nearest-even into a float format with `man` mantissa bits and
// `exp` exponent bits (bias 2^(exp-1)-1), saturating to the largest finite.
inline uint32_t encode_small_float(float x, int exp_bits, int man_bits, double max_finite) {
  const uint32_t sign = std::signbit(x) ? 1u : 0u;
  double a = std::min<double>(std::fabs(x), max_finite);
  const int bias = (1 << (exp_bits - 1)) - 1;
  uint32_t e = 0, m = 0;
  if (a > 0) {
    int ex = std::ilogb(a);
    if (ex < 1 - bias) ex = 1 - bias;  // subnormal range
    const double q = std::ldexp(a, man_bits - ex);  // mantissa with implicit bit, as integer
    double r = std::nearbyint(q);                   // ties to even under default rounding
    uint64_t mi = static_cast<uint64_t>(r);
    if (mi >= (2ull << man_bits)) { mi >>= 1; ++ex; }
    if (mi >= (1ull << man_bits)) { e = static_cast<uint32_t>(ex + bias); m = static_cast<uint32_t>(mi - (1ull << man_bits)); }
    else { e = 0; m = static_cast<uint32_t>(mi); }
  }
  return (sign << (exp_bits + man_bits)) | (e << man_bits) | m;
}

inline double decode_small_float(uint32_t bits, int exp_bits, int man_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const uint32_t sign = (bits >> (exp_bits + man_bits)) & 1u;
  const uint32_t e = (bits >> man_bits) & ((1u << exp_bits) - 1);
  const uint32_t m = bits & ((1u << man_bits) - 1);
  double v = e == 0 ? std::ldexp(double(m), 1 - bias - man_bits)
                    : std::ldexp(double(m + (1u << man_bits)), int(e) - bias - man_bits);
  return sign ? -v : v;
}

// Stores `values` as `dtype` into bytes; returns the exact values stored.
inline std::vector<double> encode(DType dtype, const std::vector<float>& values, std::vector<uint8_t>& bytes) {
  std::vector<double> exact(values.size());
  bytes.assign(values.size() * dtype_size(dtype), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = values[i];
    switch (dtype) {
      case DType::F16: {
        uint16_t b = static_cast<uint16_t>(encode_small_float(x, 5, 10, 65504.0));
        std::memcpy(&bytes[2 * i], &b, 2);
        exact[i] = decode_small_float(b, 5, 10);
        break;
      }
      case DType::BF16: {
        uint32_t u = f32_bits(x);
        u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
        uint16_t b = static_cast<uint16_t>(u >> 16);
        std::memcpy(&bytes[2 * i], &b, 2);
        exact[i] = bits_f32(uint32_t(b) << 16);
        break;
      }
      case DType::E4M3: {
        uint8_t b = static_cast<uint8_t>(encode_small_float(x, 4, 3, 448.0));
        bytes[i] = b;
        exact[i] = decode_small_float(b, 4, 3);
        break;
      }
      case DType::E5M2: {
        uint8_t b = static_cast<uint8_t>(encode_small_float(x, 5, 2, 57344.0));
        bytes[i] = b;
        exact[i] = decode_small_float(b, 5, 2);
        break;
      }
      case DType::F32:
        std::memcpy(&bytes[4 * i], &x, 4);
        exact[i] = x;
        break;
    }
  }
  return exact;
}

inline std::vector<double> decode(DType dtype, const std::vector<uint8_t>& bytes) {
  const size_t n = bytes.size() / dtype_size(dtype);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::F16: { uint16_t b; std::memcpy(&b, &bytes[2 * i], 2); out[i] = decode_small_float(b, 5, 10); break; }
      case DType::BF16: { uint16_t b; std::memcpy(&b, &bytes[2 * i], 2); out[i] = bits_f32(uint32_t(b) << 16); break; }
      case DType::E4M3: out[i] = decode_small_float(bytes[i], 4, 3); break;
      case DType::E5M2: out[i] = decode_small_float(bytes[i], 5, 2); break;
      case DType::F32: { float f; std::memcpy(&f, &bytes[4 * i], 4); out[i] = f; break; }
    }
  }
  return out;
}

}  // namespace attnjit::test

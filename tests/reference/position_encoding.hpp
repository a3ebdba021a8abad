// The positional encodings as the references apply them, from their
// definitions: LLaMA's rotary embedding (rotate-half) and ALiBi's per-head
// slopes (FlashInfer's: geometric over the largest power of two of heads,
// interleaved beyond it).
#pragma once
#include <cmath>

namespace attnjit::test {

// y = x rotated at position pos (d values; y and x must not overlap).
inline void rope_into(const double* x, double* y, int d, double pos, double rope_scale, double theta) {
  const int half = d / 2;
  for (int i = 0; i < half; ++i) {
    const double inv_freq = 1.0 / rope_scale * std::pow(theta, -2.0 * i / d);
    const double a = pos * inv_freq, c = std::cos(a), s = std::sin(a);
    y[i] = x[i] * c - x[i + half] * s;
    y[i + half] = x[i + half] * c + x[i] * s;
  }
}

inline double alibi_slope(int h, int n_heads) {
  int n = 1;
  while (2 * n <= n_heads) n *= 2;
  return h < n ? std::pow(2.0, -8.0 * (h + 1) / n) : std::pow(2.0, -4.0 * (2 * (h - n) + 1) / n);
}

}  // namespace attnjit::test

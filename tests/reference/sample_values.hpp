// What the GPU tests feed the kernels and how they judge the output: random
// values in [-scale, scale], sink logits, the relative L2 error against
// the reference, and the largest difference between two outputs.
#pragma once
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace attnjit::test {

inline std::vector<float> random_values(std::mt19937& rng, size_t n, float scale) {
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<float> x(n);
  for (auto& e : x) e = uni(rng) * scale;
  return x;
}

// Attention sinks' logits per head, from -2 to 4: against logits of a few
// units, from negligible to dominating a short request's denominator.
inline double sink_logit(int h) { return -2.0 + 1.5 * (h % 5); }
inline std::vector<double> sink_logits(int heads) {
  std::vector<double> s(heads);
  for (int h = 0; h < heads; ++h) s[h] = sink_logit(h);
  return s;
}

// ||out - ref|| / ||ref||; infinite when out holds a NaN or an infinity (unwritten, poisoned output).
inline double relative_l2(const std::vector<double>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-30)) : INFINITY;
}

// max |a[i] - b[i]| over two outputs of one size (two runs that must agree).
template <class T>
double max_abs_difference(const std::vector<T>& a, const std::vector<T>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

}  // namespace attnjit::test

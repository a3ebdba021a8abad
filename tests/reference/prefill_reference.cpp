#include "reference/prefill_reference.hpp"
#include "reference/position_encoding.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

namespace attnjit::test {

PrefillReference reference_prefill(const PrefillRequestShape& s, const PrefillOptions& o, const std::vector<double>& q,
                                   const std::vector<double>& k, const std::vector<double>& v,
                                   const std::vector<bool>* mask) {
  const int H = s.num_qo_heads, Hk = s.num_kv_heads, D = s.head_dim, group = H / Hk;
  const int64_t M = s.qo_len, N = s.kv_len;
  const double sm_scale = o.sm_scale ? *o.sm_scale : 1.0 / std::sqrt(double(D));
  const double cap = o.logits_soft_cap.value_or(0.f);
  const double rope_scale = o.rope_scale.value_or(1.f), theta = o.rope_theta.value_or(1e4f);
  const bool use_rope = o.pos_encoding_mode == PosEncoding::RopeLlama;
  const bool alibi = o.pos_encoding_mode == PosEncoding::Alibi;

  std::vector<double> keys = k;
  if (use_rope)
    for (int64_t n = 0; n < N; ++n)
      for (int h = 0; h < Hk; ++h) rope_into(&k[(n * Hk + h) * D], &keys[(n * Hk + h) * D], D, double(n), rope_scale, theta);

  PrefillReference ref;
  ref.o.assign(size_t(M) * H * D, 0.0);
  ref.lse.assign(size_t(M) * H, -INFINITY);
  auto one_row = [&](int64_t i, int h) {
    const int hk = h / group;
    const int64_t pos = N - M + i;
    std::vector<double> qh(q.begin() + (i * H + h) * D, q.begin() + (i * H + h + 1) * D);
    if (use_rope) rope_into(&q[(i * H + h) * D], qh.data(), D, double(pos), rope_scale, theta);
    std::vector<double> sc(N, -INFINITY);
    double m = -INFINITY;
    for (int64_t n = 0; n < N; ++n) {
      bool keep = true;
      if (o.custom_mask) keep = (*mask)[size_t(i * N + n)];
      else if (o.causal) keep = n <= pos;
      if (o.window_left >= 0) keep = keep && n >= pos - o.window_left;
      if (!keep) continue;
      const double* kr = &keys[(n * Hk + hk) * D];
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += qh[d] * kr[d];
      double x = dot * sm_scale * o.k_scale.value_or(1.f);
      if (alibi) x += alibi_slope(h, H) * double(n - pos);
      if (cap > 0) x = cap * std::tanh(x / cap);
      sc[n] = x;
      m = std::max(m, x);
    }
    if (m == -INFINITY) return;  // sees no key: o = 0, lse = -inf
    double denom = 0;
    std::vector<double> acc(D, 0.0);
    for (int64_t n = 0; n < N; ++n) {
      if (sc[n] == -INFINITY) continue;
      const double w = std::exp(sc[n] - m);
      denom += w;
      const double* vr = &v[(n * Hk + hk) * D];
      for (int d = 0; d < D; ++d) acc[d] += w * vr[d];
    }
    for (int d = 0; d < D; ++d) ref.o[size_t((i * H + h) * D + d)] = acc[d] * o.v_scale.value_or(1.f) / denom;
    ref.lse[size_t(i * H + h)] = (m + std::log(denom)) / std::log(2.0);
  };
  const int64_t rows = M * H;
  const unsigned workers = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(std::min<int64_t>(rows, 64))));
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int64_t r = w; r < rows; r += workers) one_row(r / H, int(r % H));
    });
  for (auto& t : pool) t.join();
  return ref;
}

}  // namespace attnjit::test

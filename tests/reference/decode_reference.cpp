#include "reference/decode_reference.hpp"
#include "reference/position_encoding.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

namespace attnjit::test {

namespace {

// One head vector rotated at position pos, as a new vector.
std::vector<double> rope(const double* x, int d, double pos, double rope_scale, double theta) {
  std::vector<double> y(d);
  rope_into(x, y.data(), d, pos, rope_scale, theta);
  return y;
}

}  // namespace

DecodeReference reference_single_decode(const SingleDecodeProblem& p, const std::vector<double>& q,
                                        const std::vector<double>& k, const std::vector<double>& v,
                                        const std::vector<double>* sinks, std::optional<int64_t> q_pos) {
  const int H = p.num_qo_heads, Hk = p.num_kv_heads, D = p.head_dim, group = H / Hk;
  const int64_t N = p.kv_len;
  const auto& o = p.options;
  const double sm_scale = o.sm_scale ? *o.sm_scale : 1.0 / std::sqrt(double(D));
  const double qs = o.q_scale.value_or(1.f), ks = o.k_scale.value_or(1.f), vs = o.v_scale.value_or(1.f);
  const double cap = o.logits_soft_cap.value_or(0.f);
  const double rope_scale = o.rope_scale.value_or(1.f), theta = o.rope_theta.value_or(1e4f);
  const bool nhd = o.kv_layout == KVLayout::NHD;
  const bool use_rope = o.pos_encoding_mode == PosEncoding::RopeLlama;
  auto at = [&](int64_t n, int h) { return nhd ? (n * Hk + h) * D : (h * N + n) * D; };
  const int64_t pos = q_pos.value_or(N - 1);  // the query's position; it sees keys [first, last]
  const int64_t first = o.window_left >= 0 ? std::max<int64_t>(0, pos - o.window_left) : 0;
  const int64_t last = std::min<int64_t>(pos, N - 1);

  // Keys as the attention sees them: rotated once per (row, kv head).
  std::vector<double> keys = k;
  if (use_rope)
    for (int64_t n = 0; n < N; ++n)
      for (int h = 0; h < Hk; ++h) {
        auto r = rope(&k[at(n, h)], D, double(n), rope_scale, theta);
        std::copy(r.begin(), r.end(), keys.begin() + at(n, h));
      }

  DecodeReference ref;
  ref.o.assign(size_t(H) * D, 0.0);
  ref.lse.assign(H, 0.0);
  auto one_head = [&](int h) {
    const int hk = h / group;
    std::vector<double> qh(q.begin() + int64_t(h) * D, q.begin() + int64_t(h + 1) * D);
    if (use_rope) qh = rope(qh.data(), D, double(pos), rope_scale, theta);
    std::vector<double> s(N, -INFINITY);
    double m = -INFINITY;
    for (int64_t n = first; n <= last; ++n) {
      const double* kr = &keys[at(n, hk)];
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += qh[d] * kr[d];
      double x = dot * qs * ks * sm_scale;
      if (o.pos_encoding_mode == PosEncoding::Alibi) x += alibi_slope(h, H) * double(n - pos);
      if (cap > 0) x = cap * std::tanh(x / cap);
      s[n] = x;
      m = std::max(m, x);
    }
    if (sinks) m = std::max(m, (*sinks)[h]);
    double denom = sinks ? std::exp((*sinks)[h] - m) : 0.0;
    std::vector<double> acc(D, 0.0);
    for (int64_t n = first; n <= last; ++n) {
      const double w = std::exp(s[n] - m);
      denom += w;
      const double* vr = &v[at(n, hk)];
      for (int d = 0; d < D; ++d) acc[d] += w * vr[d];
    }
    if (!(denom > 0)) {  // no key and no sink: nothing to attend to
      ref.lse[h] = -INFINITY;
      return;
    }
    for (int d = 0; d < D; ++d) ref.o[size_t(h) * D + d] = acc[d] * vs / denom;
    ref.lse[h] = (m + std::log(denom)) / std::log(2.0);
  };
  // Heads are independent: spread them over the machine's cores.
  const int workers = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(H)));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&, w] { for (int h = w; h < H; h += workers) one_head(h); });
  for (auto& t : pool) t.join();
  return ref;
}

}  // namespace attnjit::test

// Ragged batch prefill at head_dim 512 in CUDA-graph mode: persistent CTAs
// take (item, V/O slice) pairs from the counter. One run() captured after the
// first plan, replayed after new plans (other lengths, a length-1 query, an
// empty request, qo_len > kv_len) and checked against the double-precision
// reference each time. Skips without a GPU.
//   attnjit_tests "[prefill][d512]"
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "attnjit/attnjit.hpp"
#include "support/captured_graph.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/prefill_reference.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {

TEST_CASE("ragged batch prefill at head_dim 512 in CUDA-graph mode replays after new plans",
          "[gpu][prefill][batch][graph][d512]") {
  ATTNJIT_REQUIRE_GPU();
  constexpr int kHq = 6, kHk = 2, kD = 512;  // group 3
  constexpr int64_t kMaxRows = 300, kMaxKV = 3000;
  Runtime rt;
  const auto& cu = cuda::driver();
  cuda::ScopedDevice scope(0);
  std::mt19937 rng(512);
  std::vector<uint8_t> qb, kb, vb;
  const auto q = encode(DType::F16, random_values(rng, kMaxRows * kHq * kD, 2.f), qb);
  const auto k = encode(DType::F16, random_values(rng, kMaxKV * kHk * kD, 2.f), kb);
  const auto v = encode(DType::F16, random_values(rng, kMaxKV * kHk * kD, 1.f), vb);
  DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), qo_buf(4 * 4), kv_buf(4 * 4), ws(64 << 20),
      out(kMaxRows * kHq * kD * 2), lse(kMaxRows * kHq * 4);
  dq.upload(qb);
  dk.upload(kb);
  dv.upload(vb);
  BatchPrefillCudaGraphBuffers g;
  g.max_batch_size = 3;
  g.qo_indptr = static_cast<int32_t*>(qo_buf.get());
  g.kv_indptr = static_cast<int32_t*>(kv_buf.get());
  BatchPrefillWithRaggedKVCacheWrapper w(rt, ws.get(), ws.bytes(), g, KVLayout::NHD, "auto");
  CUstream stream;
  ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  const auto tq = make_tensor(dq.get(), DType::F16, {kMaxRows, kHq, kD});
  const auto tk = make_tensor(dk.get(), DType::F16, {kMaxKV, kHk, kD});
  const auto tv = make_tensor(dv.get(), DType::F16, {kMaxKV, kHk, kD});
  const auto to = make_tensor(out.get(), DType::F16, {kMaxRows, kHq, kD});
  const auto tl = make_tensor(lse.get(), DType::F32, {kMaxRows, kHq});

  struct Lens {
    std::vector<int32_t> qo, kv;
  };
  // Requests' KV rows follow each other in the pool from row 0.
  const std::vector<Lens> plans = {{{5, 100, 1}, {1000, 100, 17}}, {{37, 2}, {40, 2900}}, {{130, 0, 64}, {95, 0, 64}}};
  auto indptrs = [](const Lens& l, std::vector<int32_t>& qo, std::vector<int32_t>& kv) {
    qo = {0};
    kv = {0};
    for (size_t b = 0; b < l.qo.size(); ++b) {
      qo.push_back(qo.back() + l.qo[b]);
      kv.push_back(kv.back() + l.kv[b]);
    }
  };
  auto plan = [&](const Lens& l) {
    std::vector<int32_t> qo, kv;
    indptrs(l, qo, kv);
    BatchPrefillPlanOptions o;
    o.causal = true;
    o.q_data_type = DType::F16;
    w.plan(qo, kv, kHq, kHk, kD, o, stream);
  };
  plan(plans[0]);
  const CapturedGraph graph(stream, [&] { w.run(tq, tk, tv, to, &tl, stream); });
  for (size_t i = 0; i < plans.size(); ++i) {
    INFO("plan " << i);
    if (i > 0) plan(plans[i]);
    out.poison();
    lse.poison();
    graph.launch(stream);
    ATTNJIT_CU(cu.StreamSynchronize(stream));
    const auto got = decode(DType::F16, out.download());
    const auto got_lse = decode(DType::F32, lse.download());
    std::vector<int32_t> qo, kv;
    indptrs(plans[i], qo, kv);
    double num = 0, den = 0, lse_abs = 0;
    for (size_t b = 0; b + 1 < qo.size(); ++b) {
      const int64_t M = qo[b + 1] - qo[b], N = kv[b + 1] - kv[b];
      if (M == 0) continue;
      const std::vector<double> qr(q.begin() + qo[b] * kHq * kD, q.begin() + qo[b + 1] * kHq * kD);
      const std::vector<double> kr(k.begin() + kv[b] * kHk * kD, k.begin() + kv[b + 1] * kHk * kD);
      const std::vector<double> vr(v.begin() + kv[b] * kHk * kD, v.begin() + kv[b + 1] * kHk * kD);
      PrefillOptions po;
      po.causal = true;
      const auto ref = reference_prefill({kHq, kHk, kD, M, N}, po, qr, kr, vr, nullptr);
      for (size_t j = 0; j < ref.o.size(); ++j) {
        const double x = got[size_t(qo[b] * kHq * kD) + j];
        REQUIRE(std::isfinite(x));
        num += (x - ref.o[j]) * (x - ref.o[j]);
        den += ref.o[j] * ref.o[j];
      }
      for (size_t j = 0; j < ref.lse.size(); ++j) {
        const double x = got_lse[size_t(qo[b] * kHq) + j];
        if (std::isinf(ref.lse[j])) CHECK((std::isinf(x) && x < 0));
        else lse_abs = std::max(lse_abs, std::fabs(x - ref.lse[j]));
      }
    }
    CHECK(std::sqrt(num / std::max(den, 1e-30)) <= 2e-3);
    CHECK(lse_abs <= 4e-3);
  }
  cu.StreamDestroy(stream);
}

}  // namespace attnjit::test

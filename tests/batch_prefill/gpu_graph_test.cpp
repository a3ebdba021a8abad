// Batch prefill in CUDA-graph mode on the GPU: one run() captured, then
// replayed after new plans (other lengths, a smaller batch, another custom
// mask) and checked each time against the double-precision reference; and
// the paged run's fp8 calibration scales. Skips without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>

#include "attnjit/attnjit.hpp"
#include "support/captured_graph.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/prefill_reference.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {
namespace {

constexpr int kHq = 6, kHk = 2, kD = 128, kPage = 16;  // group 3: an odd GQA group
constexpr int64_t kMaxRows = 400, kPoolRows = 8192, kPoolPages = kPoolRows / kPage;

// One plan of the test: its requests' lengths, and whether it brings a
// custom mask (random, fixed by the seed) instead of causal.
struct GraphPlan {
  std::vector<int32_t> qo_lens, kv_lens;
  bool custom = false;
};

// Random q and a K/V pool shared by every plan: the ragged wrapper reads its
// rows [0, nnz_kv), the paged one reads pages of it, in a shuffled order.
struct Pool {
  std::vector<double> q, k, v;  // logical [rows, H, D], as the kernel's dtype rounds them
  DeviceBuffer dq, dk, dv;
};

Pool make_pool(DType kv_dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  Pool p;
  std::vector<uint8_t> qb, kb, vb;
  p.q = encode(DType::BF16, random_values(rng, kMaxRows * kHq * kD, 2.f), qb);
  p.k = encode(kv_dtype, random_values(rng, kPoolRows * kHk * kD, 2.f), kb);
  p.v = encode(kv_dtype, random_values(rng, kPoolRows * kHk * kD, 1.f), vb);
  p.dq = DeviceBuffer(qb.size());
  p.dk = DeviceBuffer(kb.size());
  p.dv = DeviceBuffer(vb.size());
  p.dq.upload(qb);
  p.dk.upload(kb);
  p.dv.upload(vb);
  return p;
}

struct PlanArrays {
  std::vector<int32_t> qo_indptr{0}, kv_indptr{0};           // kv_indptr: rows (ragged) or pages (paged)
  std::vector<int32_t> page_ids, last_page_len;             // paged
  std::vector<std::vector<int64_t>> rows;                   // each request's pool rows, in order
  std::vector<std::vector<bool>> masks;                     // custom: each request's [qo, kv] block
};

// The index arrays of a plan over the pool; pages are drawn at random.
PlanArrays arrays(const GraphPlan& g, bool paged, std::mt19937& rng) {
  PlanArrays a;
  std::vector<int32_t> free_pages(kPoolPages);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  int64_t next_row = 0;
  size_t next_page = 0;
  std::bernoulli_distribution coin(0.7);
  for (size_t b = 0; b < g.qo_lens.size(); ++b) {
    const int32_t qo = g.qo_lens[b], kv = g.kv_lens[b];
    a.qo_indptr.push_back(a.qo_indptr.back() + qo);
    std::vector<int64_t> rows;
    if (paged) {
      const int32_t pages = (kv + kPage - 1) / kPage;
      for (int32_t i = 0; i < pages; ++i) a.page_ids.push_back(free_pages[next_page++]);
      a.kv_indptr.push_back(a.kv_indptr.back() + pages);
      a.last_page_len.push_back(pages ? kv - (pages - 1) * kPage : 0);
      for (int32_t j = 0; j < kv; ++j)
        rows.push_back(int64_t(a.page_ids[a.kv_indptr[b] + j / kPage]) * kPage + j % kPage);
    } else {
      for (int32_t j = 0; j < kv; ++j) rows.push_back(next_row + j);
      next_row += kv;
      a.kv_indptr.push_back(int32_t(next_row));
    }
    a.rows.push_back(std::move(rows));
    std::vector<bool> m;
    if (g.custom)
      for (int64_t i = 0; i < int64_t(qo) * kv; ++i) m.push_back(coin(rng));
    a.masks.push_back(std::move(m));
  }
  return a;
}

struct Errors {
  double o_rel = 0, lse_abs = 0;
};

// The output rows of the plan against the reference, request by request.
Errors compare(const Pool& pool, const GraphPlan& g, const PlanArrays& a, const std::vector<double>& out,
               const std::vector<double>& lse, float k_scale = 1.f, float v_scale = 1.f) {
  Errors e;
  double num = 0, den = 0;
  for (size_t b = 0; b < g.qo_lens.size(); ++b) {
    const int64_t M = g.qo_lens[b], N = g.kv_lens[b], q0 = a.qo_indptr[b];
    std::vector<double> q(pool.q.begin() + q0 * kHq * kD, pool.q.begin() + (q0 + M) * kHq * kD), k, v;
    for (int64_t r : a.rows[b])
      for (int64_t i = 0; i < kHk * kD; ++i) {
        k.push_back(pool.k[r * kHk * kD + i] * k_scale);
        v.push_back(pool.v[r * kHk * kD + i] * v_scale);
      }
    PrefillOptions po;
    po.causal = !g.custom;
    po.custom_mask = g.custom;
    const auto ref = reference_prefill({kHq, kHk, kD, M, N}, po, q, k, v, g.custom ? &a.masks[b] : nullptr);
    for (size_t i = 0; i < ref.o.size(); ++i) {
      const double got = out[size_t(q0 * kHq * kD) + i];
      if (!std::isfinite(got)) return {INFINITY, INFINITY};
      num += (got - ref.o[i]) * (got - ref.o[i]);
      den += ref.o[i] * ref.o[i];
    }
    for (size_t i = 0; i < ref.lse.size(); ++i) {
      const double got = lse[size_t(q0 * kHq) + i];
      if (std::isinf(ref.lse[i])) {
        if (!(std::isinf(got) && got < 0)) e.lse_abs = INFINITY;
        continue;
      }
      e.lse_abs = std::max(e.lse_abs, std::fabs(got - ref.lse[i]));
    }
  }
  e.o_rel = std::sqrt(num / std::max(den, 1e-30));
  return e;
}

}  // namespace

TEST_CASE("batch prefill in CUDA-graph mode replays correctly after new plans", "[gpu][prefill][batch][graph][fa3_ws]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  // The planner's choice, and the warp-specialized Hopper skeleton by name (its own item loop).
  const std::string backend = GENERATE(as<std::string>{}, "auto", "fa3_ws");
  if (backend == "fa3_ws" && rt.default_arch() != "sm_90a") return;
  INFO("backend " << backend);
  const auto& cu = cuda::driver();
  cuda::ScopedDevice scope(0);
  // Each session: one wrapper, one graph captured after its first plan, then
  // replayed after every plan: lengths that are not multiples of the tiles
  // or pages, a length-1 query, an empty request, a smaller batch. The
  // causal session starts with short queries (16-row warps), the custom-mask
  // one with a long one (32-row warps, kept for the short plans after it).
  const std::vector<std::vector<GraphPlan>> sessions = {
      {{{5, 100, 1}, {3000, 100, 17}, false}, {{37, 2}, {40, 5000}, false}, {{64, 64, 64}, {64, 1000, 2000}, false}},
      {{{250, 1, 0}, {251, 1, 9}, true}, {{64, 64, 64}, {64, 1000, 2000}, true}, {{3}, {4000}, true}},
  };
  for (bool paged : {false, true})
    for (size_t si = 0; si < sessions.size(); ++si) {
      const auto& plans = sessions[si];
      INFO((paged ? "paged" : "ragged") << " session " << si);
      Pool pool = make_pool(DType::BF16, uint32_t(11 + si + 2 * paged));
      std::mt19937 rng(uint32_t(21 + si + 2 * paged));
      DeviceBuffer qo_buf(4 * 4), kv_buf(4 * 4), ids_buf(kPoolPages * 4), last_buf(3 * 4), mask_buf(1 << 20),
          qk_buf(4 * 4), ws(16 << 20), out(kMaxRows * kHq * kD * 2), lse(kMaxRows * kHq * 4);
      BatchPrefillCudaGraphBuffers g;
      g.max_batch_size = 3;
      g.qo_indptr = static_cast<int32_t*>(qo_buf.get());
      g.kv_indptr = static_cast<int32_t*>(kv_buf.get());
      g.custom_mask = static_cast<uint8_t*>(mask_buf.get());
      g.custom_mask_bytes = int64_t(mask_buf.bytes());
      g.qk_indptr = static_cast<int32_t*>(qk_buf.get());
      if (paged) {
        g.paged_kv_indices = static_cast<int32_t*>(ids_buf.get());
        g.max_num_pages = kPoolPages;
        g.paged_kv_last_page_len = static_cast<int32_t*>(last_buf.get());
      }
      std::optional<BatchPrefillWithRaggedKVCacheWrapper> ragged_w;
      std::optional<BatchPrefillWithPagedKVCacheWrapper> paged_w;
      if (paged) paged_w.emplace(rt, ws.get(), ws.bytes(), g, KVLayout::NHD, backend);
      else ragged_w.emplace(rt, ws.get(), ws.bytes(), g, KVLayout::NHD, backend);
      CUstream stream;
      ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
      const auto tq = make_tensor(pool.dq.get(), DType::BF16, {kMaxRows, kHq, kD});
      const auto to = make_tensor(out.get(), DType::BF16, {kMaxRows, kHq, kD});
      const auto tl = make_tensor(lse.get(), DType::F32, {kMaxRows, kHq});
      auto plan = [&](const GraphPlan& p, const PlanArrays& a) {
        BatchPrefillPlanOptions o;
        o.causal = !p.custom;
        o.q_data_type = DType::BF16;
        for (const auto& m : a.masks) o.custom_mask.insert(o.custom_mask.end(), m.begin(), m.end());
        if (paged) paged_w->plan(a.qo_indptr, a.kv_indptr, a.page_ids, a.last_page_len, kHq, kHk, kD, kPage, o, stream);
        else ragged_w->plan(a.qo_indptr, a.kv_indptr, kHq, kHk, kD, o, stream);
      };
      auto run = [&] {
        if (paged) {
          TensorView kc = make_tensor(pool.dk.get(), DType::BF16, {kPoolPages, kPage, kHk, kD});
          TensorView vc = make_tensor(pool.dv.get(), DType::BF16, {kPoolPages, kPage, kHk, kD});
          paged_w->run(tq, kc, vc, to, &tl, stream);
        } else {
          ragged_w->run(tq, make_tensor(pool.dk.get(), DType::BF16, {kPoolRows, kHk, kD}),
                        make_tensor(pool.dv.get(), DType::BF16, {kPoolRows, kHk, kD}), to, &tl, stream);
        }
      };
      // Capture once, after the first plan.
      PlanArrays first = arrays(plans[0], paged, rng);
      plan(plans[0], first);
      const CapturedGraph graph(stream, [&] { run(); });
      for (size_t i = 0; i < plans.size(); ++i) {
        INFO("plan " << i);
        const PlanArrays a = i == 0 ? first : arrays(plans[i], paged, rng);
        if (i > 0) plan(plans[i], a);
        out.poison();
        lse.poison();
        graph.launch(stream);
        ATTNJIT_CU(cu.StreamSynchronize(stream));
        const auto e =
            compare(pool, plans[i], a, decode(DType::BF16, out.download()), decode(DType::F32, lse.download()));
        CHECK(e.o_rel <= 1e-2);
        CHECK(e.lse_abs <= 2e-2);
        WARN((paged ? "paged" : "ragged") << " session " << si << " plan " << i << ": rel L2 err(o) " << e.o_rel
                                          << ", abs err(lse) " << e.lse_abs);
      }
      // Plans the captured launch cannot serve are refused: more q rows than
      // the run was given, or another kernel (causal <-> custom mask).
      GraphPlan too_long{{kMaxRows + 1}, {kMaxRows + 1}, false};
      CHECK_THROWS_WITH(plan(too_long, arrays(too_long, paged, rng)), Catch::Contains("was given q with 400 rows"));
      GraphPlan other{{4}, {40}, !plans[0].custom};
      CHECK_THROWS_WITH(plan(other, arrays(other, paged, rng)), Catch::Contains("the kernel would change"));
      cu.StreamDestroy(stream);
    }
}

TEST_CASE("paged batch prefill: fp8 KV with k_scale and v_scale", "[gpu][prefill][batch][fp8]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  Pool pool = make_pool(DType::E4M3, 31);
  std::mt19937 rng(32);
  const GraphPlan p{{7, 128, 1}, {700, 128, 33}, false};
  const PlanArrays a = arrays(p, true, rng);
  DeviceBuffer ws(16 << 20), out(kMaxRows * kHq * kD * 2), lse(kMaxRows * kHq * 4);
  BatchPrefillWithPagedKVCacheWrapper w(rt, ws.get(), ws.bytes(), KVLayout::NHD);
  BatchPrefillPlanOptions o;
  o.causal = true;
  o.q_data_type = DType::BF16;
  o.kv_data_type = DType::E4M3;
  w.plan(a.qo_indptr, a.kv_indptr, a.page_ids, a.last_page_len, kHq, kHk, kD, kPage, o, nullptr);
  const int64_t nnz = a.qo_indptr.back();
  const auto tq = make_tensor(pool.dq.get(), DType::BF16, {nnz, kHq, kD});
  const auto to = make_tensor(out.get(), DType::BF16, {nnz, kHq, kD});
  const auto tl = make_tensor(lse.get(), DType::F32, {nnz, kHq});
  const auto kc = make_tensor(pool.dk.get(), DType::E4M3, {kPoolPages, kPage, kHk, kD});
  const auto vc = make_tensor(pool.dv.get(), DType::E4M3, {kPoolPages, kPage, kHk, kD});
  out.poison();
  w.run(tq, kc, vc, to, &tl, 0.5f, 2.f, nullptr);
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  const auto e = compare(pool, p, a, decode(DType::BF16, out.download()), decode(DType::F32, lse.download()), 0.5f, 2.f);
  CHECK(e.o_rel <= 1e-2);
  CHECK(e.lse_abs <= 2e-2);
  WARN("fp8 e4m3 k_scale 0.5 v_scale 2: rel L2 err(o) " << e.o_rel << ", abs err(lse) " << e.lse_abs);
  CHECK_THROWS_WITH(w.run(tq, kc, vc, to, &tl, -1.f, std::nullopt, nullptr), Catch::Contains("k_scale=-1"));
}

}  // namespace attnjit::test

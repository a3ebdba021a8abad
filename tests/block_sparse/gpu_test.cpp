// Block sparsity on the GPU through the C++ API: the classes a run writes
// (the workspace's block_mask region) against a CPU evaluation of the same
// mask over the plan's tiles, and the output against the same variant without
// block sparsity (equal up to float reassociation), on lengths no multiple of
// a tile, GQA group 3, heads_vary both ways, fa2 and (sm_90a) fa3. The Python
// GPU tests (tools/python/tests/test_block_sparse.py) add float64 references.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attnjit/attnjit.hpp"
#include "block_mask_params.h"
#include "cuda/driver.hpp"
#include "ops/plan_fill.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/sample_values.hpp"
#include "spec/prefill_kernel.hpp"
#include "support/prefill_problems.hpp"
#include "support/device_buffer.hpp"
#include "support/dltensor_maker.hpp"
#include "support/gpu_support.hpp"

namespace attnjit::test {
namespace {

// kv <= q within one document; head h sees only keys with (kv + h) % 5 != 0 when per_head.
const char* kMask = "return p.doc_at(q) == p.doc_at(kv) && kv <= q && (p.per_head == 0 || (kv + h) % 5 != 0);";

bool mask(const std::vector<int32_t>& doc, int per_head, int h, int q, int kv) {
  return doc[q] == doc[kv] && kv <= q && (per_head == 0 || (kv + h) % 5 != 0);
}

}  // namespace

TEST_CASE("block sparsity, single prefill: classes against the CPU, output against the dense variant",
          "[gpu][block_sparse]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  cuda::ScopedDevice scope(0);
  const int64_t M = 397, N = 1031, H = 12, Hk = 4, D = 128, group = H / Hk;
  std::vector<int32_t> doc(N);
  for (int64_t i = 0; i < N; ++i) doc[i] = int32_t(i < 150 ? 0 : i < 400 ? 1 : i < 401 ? 2 : 3);
  DeviceBuffer ddoc(N * 4);
  ddoc.upload(doc);
  DLTensorMaker tdoc({N}, kI32);
  tdoc.data(ddoc.get());

  std::vector<std::string> backends = {"fa2"};
  if (rt.default_arch() == "sm_90a") backends.push_back("fa3");
  const DType dt = DType::F16;
  std::mt19937 rng(3);
  std::vector<uint8_t> qb, kb, vb;
  encode(dt, random_values(rng, M * H * D, 2.f), qb);
  encode(dt, random_values(rng, N * Hk * D, 2.f), kb);
  encode(dt, random_values(rng, N * Hk * D, 2.f), vb);
  DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), dsparse(M * H * D * 2), ddense(M * H * D * 2);
  dq.upload(qb);
  dk.upload(kb);
  dv.upload(vb);
  const TensorView tq = make_tensor(dq.get(), dt, {M, H, D}), tk = make_tensor(dk.get(), dt, {N, Hk, D}),
                   tv = make_tensor(dv.get(), dt, {N, Hk, D});

  for (const std::string& backend : backends)
    for (int per_head : {0, 1})
      for (bool heads_vary : {true, false}) {
        if (per_head && !heads_vary) continue;  // the promise would be false
        INFO("backend=" << backend << " per_head=" << per_head << " heads_vary=" << heads_vary);
        auto make = [&](bool sparse) {
          VariantSource s;
          s.mask_mod = kMask;
          s.params = {{"doc", VariantParamType::I32, 1}, {"per_head", VariantParamType::I32, 0}};
          s.block_sparse = sparse;
          s.heads_vary = sparse ? heads_vary : true;
          auto v = std::make_shared<Variant>(s);
          v->bind("doc", tdoc.get());
          v->bind("per_head", int32_t(per_head));
          return v;
        };
        SinglePrefillProblem p = single_prefill_problem(M, N, int(H), int(Hk), int(D), dt);
        p.options.backend = backend;
        p.options.return_lse = false;
        auto run = [&](bool sparse, DeviceBuffer& out, std::vector<uint8_t>* classes, ops::SinglePrefillLayout* L) {
          SinglePrefillProblem pp = p;
          pp.options.variant = make(sparse);
          SinglePrefillPlan plan(rt, pp);
          DeviceBuffer ws(std::max<size_t>(plan.workspace_bytes(), 1));
          plan.run(tq, tk, tv, make_tensor(out.get(), dt, {M, H, D}), nullptr, nullptr, ws.get(), ws.bytes(), nullptr,
                   nullptr);
          ATTNJIT_CU(cuda::driver().CtxSynchronize());
          if (classes) {
            *L = ops::plan_single_prefill(pp, ops::device_figures(rt, 0));
            const auto all = ws.download();
            const auto& r = L->workspace.region("block_mask");
            classes->assign(all.begin() + r.offset, all.begin() + r.offset + r.bytes);
          }
        };
        std::vector<uint8_t> region;
        ops::SinglePrefillLayout L;
        run(true, dsparse, &region, &L);
        run(false, ddense, nullptr, nullptr);

        // The classes: counts, then each (row, slot)'s kept tiles ascending.
        const auto& k = *L.prefill.spec.as<PrefillKernel>();
        const int tq_rows = k.tile_q(), tkv = k.tile_kv(), slots = L.block_mask_slots, stride = L.block_mask_stride;
        CHECK(slots == (heads_vary ? Hk : 1));
        std::vector<int32_t> ints(region.size() / 4);
        std::memcpy(ints.data(), region.data(), ints.size() * 4);
        int empty = 0;
        for (int row = 0; row < L.num_q_tiles; ++row)
          for (int slot = 0; slot < slots; ++slot) {
            std::vector<int32_t> expected;
            for (int t = 0; t < stride; ++t) {
              bool kept = false, dropped = false;
              for (int pr = row * tq_rows; pr < std::min<int64_t>((row + 1) * tq_rows, M * group); ++pr)
                for (int j = t * tkv; j < std::min<int64_t>((t + 1) * tkv, N); ++j) {
                  const bool m = mask(doc, per_head, slot * int(group) + pr % int(group), pr / int(group), j);
                  kept = kept || m;
                  dropped = dropped || !m;
                }
              if (kept) expected.push_back(t * 2 + (dropped ? 0 : 1));
              empty += !kept;
            }
            const int64_t at = int64_t(row) * slots + slot;
            REQUIRE(ints[at] == int32_t(expected.size()));
            const int32_t* got = ints.data() + int64_t(L.num_q_tiles) * slots + at * stride;
            CHECK(std::vector<int32_t>(got, got + expected.size()) == expected);
          }
        CHECK(empty > 0);  // the documents leave tiles to skip

        std::vector<double> a = decode(dt, dsparse.download()), b = decode(dt, ddense.download());
        double num = 0, den = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          REQUIRE(std::isfinite(a[i]));
          num += (a[i] - b[i]) * (a[i] - b[i]);
          den += b[i] * b[i];
        }
        CHECK(std::sqrt(num / den) < 1e-3);
      }
}

}  // namespace attnjit::test

// Reclassify::OnBind on the GPU (issue 31 item 2, reuse across calls): the
// second run of a plan with the same bound values does not classify, a bind
// does. Shown by what each run leaves, so the test fails if the policy is
// not followed: the mask keeps everything at first (every tile full, so
// the prefill never evaluates mask_mod), then its doc-id tensor is
// rewritten in place to four documents. A run that classified again would
// follow them; an on_bind run without a bind must repeat the first output
// bit for bit, and after a bind give the four documents' output (against
// the same mask without block sparsity). The workspace's block_mask region,
// poisoned first, stays untouched under on_bind (the plan keeps its
// classes) and is written under each_run. A second stream classifies into
// its own copy.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attnjit/attnjit.hpp"
#include "cuda/driver.hpp"
#include "ops/plan_fill.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/sample_values.hpp"
#include "support/prefill_problems.hpp"
#include "support/device_buffer.hpp"
#include "support/dltensor_maker.hpp"
#include "support/gpu_support.hpp"

namespace attnjit::test {

namespace {

const char* kDocuments = "return p.doc_at(q) == p.doc_at(kv);";

}  // namespace

TEST_CASE("reclassify=on_bind: a second run keeps the classes, a bind classifies again",
          "[gpu][block_sparse][reclassify]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  cuda::ScopedDevice scope(0);
  const int64_t M = 397, N = 1031, H = 12, Hk = 4, D = 128;
  const DType dt = DType::F16;
  std::vector<int32_t> one(N, 0), four(N);
  for (int64_t i = 0; i < N; ++i) four[i] = int32_t(i < 150 ? 0 : i < 400 ? 1 : i < 401 ? 2 : 3);
  DeviceBuffer ddoc(N * 4);
  DLTensorMaker tdoc({N}, kI32);
  tdoc.data(ddoc.get());

  std::mt19937 rng(11);
  std::vector<uint8_t> qb, kb, vb;
  encode(dt, random_values(rng, M * H * D, 2.f), qb);
  encode(dt, random_values(rng, N * Hk * D, 2.f), kb);
  encode(dt, random_values(rng, N * Hk * D, 2.f), vb);
  DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), dout(M * H * D * 2);
  dq.upload(qb);
  dk.upload(kb);
  dv.upload(vb);
  const TensorView tq = make_tensor(dq.get(), dt, {M, H, D}), tk = make_tensor(dk.get(), dt, {N, Hk, D}),
                   tv = make_tensor(dv.get(), dt, {N, Hk, D}), to = make_tensor(dout.get(), dt, {M, H, D});

  std::vector<std::string> backends = {"fa2"};
  if (rt.default_arch() == "sm_90a") backends.push_back("fa3");
  for (const std::string& backend : backends) {
    INFO("backend=" << backend);
    auto variant = [&](bool sparse, Reclassify policy) {
      VariantSource s;
      s.mask_mod = kDocuments;
      s.params = {{"doc", VariantParamType::I32, 1}};
      s.block_sparse = sparse;
      s.heads_vary = !sparse;  // the mask does not read h
      s.reclassify = policy;
      auto v = std::make_shared<Variant>(s);
      v->bind("doc", tdoc.get());
      return v;
    };
    SinglePrefillProblem p = single_prefill_problem(M, N, int(H), int(Hk), int(D), dt);
    p.options.backend = backend;
    p.options.return_lse = false;

    const auto kept = variant(true, Reclassify::OnBind);
    p.options.variant = kept;
    SinglePrefillPlan plan(rt, p);
    const ops::SinglePrefillLayout L = ops::plan_single_prefill(p, ops::device_figures(rt, 0));
    const auto& region = L.workspace.region("block_mask");
    DeviceBuffer ws(std::max<size_t>(plan.workspace_bytes(), 1));
    const std::vector<uint8_t> poison(ws.bytes(), 0x7f);
    ws.upload(poison);
    auto region_poisoned = [&] {
      const auto all = ws.download();
      for (size_t i = region.offset; i < region.offset + region.bytes; ++i)
        if (all[i] != 0x7f) return false;
      return true;
    };
    auto run = [&](const SinglePrefillPlan& pl, const Variant& v, Stream stream = nullptr) {
      pl.run(tq, tk, tv, to, nullptr, nullptr, ws.get(), ws.bytes(), stream, &v);
      ATTNJIT_CU(cuda::driver().CtxSynchronize());
      return decode(dt, dout.download());
    };
    // The mask without block sparsity, on the doc ids as they are now: every pair tested.
    auto dense_now = [&] {
      SinglePrefillProblem d = p;
      const auto v = variant(false, Reclassify::EachRun);
      d.options.variant = v;
      SinglePrefillPlan dense(rt, d);
      return run(dense, *v);
    };

    ddoc.upload(one);
    const std::vector<double> first = run(plan, *kept);
    CHECK(relative_l2(first, dense_now()) < 1e-3);
    CHECK(region_poisoned());  // classified into the plan's own copy

    ddoc.upload(four);  // in place, no bind: not seen under on_bind
    const std::vector<double> stale = run(plan, *kept);
    CHECK(stale == first);  // the kept classes: every tile full, mask_mod never evaluated
    const std::vector<double> four_docs = dense_now();
    REQUIRE(relative_l2(four_docs, first) > 0.1);  // the test can tell the two masks apart

    kept->bind("doc", tdoc.get());  // the same tensor, bound anew: seen
    const std::vector<double> rebound = run(plan, *kept);
    CHECK(relative_l2(rebound, four_docs) < 1e-3);
    CHECK(region_poisoned());

    // Another stream: its own copy, classified there for the same values.
    CUstream side = nullptr;
    ATTNJIT_CU(cuda::driver().StreamCreate(&side, CU_STREAM_NON_BLOCKING));
    const std::vector<double> on_side = run(plan, *kept, side);
    ATTNJIT_CU(cuda::driver().StreamDestroy(side));
    CHECK(on_side == rebound);

    // each_run, the same plan (the run's variant decides): the in-place rewrite is seen, in the workspace.
    ddoc.upload(one);
    const auto each = variant(true, Reclassify::EachRun);
    const std::vector<double> each_run = run(plan, *each);
    CHECK(relative_l2(each_run, first) < 1e-3);
    CHECK_FALSE(region_poisoned());
    // And on_bind again, without a bind since the four documents: still their classes.
    ws.upload(poison);
    const std::vector<double> kept_four = run(plan, *kept);
    CHECK(region_poisoned());
    CHECK(relative_l2(kept_four, first) > 0.1);  // partial tiles evaluate the mask on today's doc ids; the others are stale
  }
}

}  // namespace attnjit::test

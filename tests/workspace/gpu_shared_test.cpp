// Several wrappers on one float workspace, as vLLM and SGLang use them: a
// batch-decode wrapper and three batch-prefill wrappers (ragged, ragged,
// paged) are all planned before any runs, then run in another order on one
// stream. The workspace is scratch only, so each output must equal, bit for
// bit, the same wrapper's output with a workspace of its own; and again
// after a re-plan of one of them between the others' runs, and with the
// plan memory handed over as FlashInfer's int_workspace_buffer. Shapes are
// chosen so every plan splits its KV (uses the shared scratch). Skips
// without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <random>

#include "attnjit/attnjit.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "support/decode_entry_args.hpp"
#include "support/paged_kv_device.hpp"
#include "reference/host_dtypes.hpp"

namespace attnjit::test {
namespace {

constexpr int kHq = 8, kHk = 2, kD = 128;
constexpr DType kDt = DType::BF16;

// A ragged prefill problem with a short query over a long KV, so it splits.
struct RaggedInputs {
  std::vector<int32_t> qo_indptr, kv_indptr;
  DeviceBuffer q, k, v;
  int64_t nnz_qo = 0, nnz_kv = 0;
};

RaggedInputs make_ragged(const std::vector<int32_t>& qo_lens, const std::vector<int32_t>& kv_lens, uint32_t seed) {
  RaggedInputs r;
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (size_t b = 0; b < qo_lens.size(); ++b) {
    r.qo_indptr.push_back(r.qo_indptr.back() + qo_lens[b]);
    r.kv_indptr.push_back(r.kv_indptr.back() + kv_lens[b]);
  }
  r.nnz_qo = r.qo_indptr.back();
  r.nnz_kv = r.kv_indptr.back();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  auto upload = [&](size_t n) {
    std::vector<float> x(n);
    for (auto& e : x) e = 2.f * uni(rng);
    std::vector<uint8_t> bytes;
    encode(kDt, x, bytes);
    DeviceBuffer d(bytes.size());
    d.upload(bytes);
    return d;
  };
  r.q = upload(size_t(r.nnz_qo) * kHq * kD);
  r.k = upload(size_t(r.nnz_kv) * kHk * kD);
  r.v = upload(size_t(r.nnz_kv) * kHk * kD);
  return r;
}

struct Outputs {
  DeviceBuffer o, lse;
};

Outputs outputs(int64_t rows) {
  Outputs out{DeviceBuffer(size_t(rows) * kHq * kD * 2), DeviceBuffer(size_t(rows) * kHq * 4)};
  out.o.poison();
  out.lse.poison();
  return out;
}

struct Step {
  std::function<void()> plan;
  std::function<void(Outputs&)> run;
  int64_t rows;
};

// Runs every step on `workspace` (all planned first, then run in reverse) and
// returns the downloaded outputs.
std::vector<std::vector<uint8_t>> plan_all_then_run(std::vector<Step>& steps) {
  for (auto& s : steps) s.plan();
  std::vector<Outputs> outs;
  for (auto& s : steps) outs.push_back(outputs(s.rows));
  for (size_t i = steps.size(); i-- > 0;) steps[i].run(outs[i]);
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  std::vector<std::vector<uint8_t>> got;
  for (auto& o : outs) {
    auto a = o.o.download(), b = o.lse.download();
    a.insert(a.end(), b.begin(), b.end());
    got.push_back(std::move(a));
  }
  return got;
}

}  // namespace

TEST_CASE("wrappers sharing one float workspace, all planned before any runs, give their own results",
          "[gpu][workspace]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  // Short queries over long KV: every plan splits and fills the scratch.
  const RaggedInputs a = make_ragged({3, 1, 7}, {5000, 333, 2900}, 11);
  const RaggedInputs b = make_ragged({16, 2}, {3100, 4097}, 12);
  // Three requests, one query token each, over 16-token pages (NHD).
  const DevicePagedBatch paged(PagedBatchShape{{2001, 17, 4500}, 16, kHq, kHk, kD, kDt, kDt, KVLayout::NHD, 3}, 13);
  const PagedBatchShape& ps = paged.shape;
  const PagedBatch& pb = paged.host;
  const TensorView kc = paged.cache_view(paged.k), vc = paged.cache_view(paged.v), tq = paged.q_view();
  const std::vector<int32_t> one_token_per_request{0, 1, 2, 3};

  auto steps_on = [&](void* ws, size_t ws_bytes, bool borrow_int, std::vector<DeviceBuffer>& int_buffers) {
    auto ragged = [&](const RaggedInputs& in, bool causal) {
      auto w = std::make_shared<BatchPrefillWithRaggedKVCacheWrapper>(rt, ws, ws_bytes);
      if (borrow_int) {
        int_buffers.emplace_back(8 << 20);
        w->set_int_workspace(int_buffers.back().get(), int_buffers.back().bytes());
      }
      BatchPrefillPlanOptions o;
      o.q_data_type = kDt;
      o.causal = causal;
      return Step{[w, &in, o] { w->plan(in.qo_indptr, in.kv_indptr, kHq, kHk, kD, o, nullptr); },
                  [w, &in](Outputs& out) {
                    const TensorView lse = make_tensor(out.lse.get(), DType::F32, {in.nnz_qo, kHq});
                    w->run(make_tensor(in.q.get(), kDt, {in.nnz_qo, kHq, kD}),
                           make_tensor(in.k.get(), kDt, {in.nnz_kv, kHk, kD}),
                           make_tensor(in.v.get(), kDt, {in.nnz_kv, kHk, kD}),
                           make_tensor(out.o.get(), kDt, {in.nnz_qo, kHq, kD}), &lse, nullptr);
                  },
                  in.nnz_qo};
    };
    std::vector<Step> steps{ragged(a, true), ragged(b, false)};
    // Paged prefill: one query token per request over the paged cache.
    auto pw = std::make_shared<BatchPrefillWithPagedKVCacheWrapper>(rt, ws, ws_bytes);
    auto dw = std::make_shared<BatchDecodeWithPagedKVCacheWrapper>(rt, ws, ws_bytes);
    if (borrow_int) {
      int_buffers.emplace_back(8 << 20);
      pw->set_int_workspace(int_buffers.back().get(), int_buffers.back().bytes());
      int_buffers.emplace_back(8 << 20);
      dw->set_int_workspace(int_buffers.back().get(), int_buffers.back().bytes());
    }
    steps.push_back(Step{[&, pw] {
                           BatchPrefillPlanOptions o;
                           o.q_data_type = kDt;
                           o.causal = true;
                           pw->plan(one_token_per_request, pb.indptr, pb.indices, pb.last, kHq, kHk, kD, ps.page_size,
                                    o, nullptr);
                         },
                         [&, pw](Outputs& out) {
                           const TensorView lse = make_tensor(out.lse.get(), DType::F32, {3, kHq});
                           pw->run(tq, kc, vc, make_tensor(out.o.get(), kDt, {3, kHq, kD}), &lse, nullptr);
                         },
                         3});
    steps.push_back(Step{[&, dw] { dw->plan(pb.indptr, pb.indices, pb.last, wrapper_plan_args(ps, -1), nullptr); },
                         [&, dw](Outputs& out) {
                           const TensorView lse = make_tensor(out.lse.get(), DType::F32, {3, kHq});
                           dw->run(tq, kc, vc, make_tensor(out.o.get(), kDt, {3, kHq, kD}), &lse);
                         },
                         3});
    return steps;
  };

  // Alone: each wrapper with a workspace of its own, planned and run at once.
  constexpr size_t kWrappers = 4;
  std::vector<std::vector<uint8_t>> alone;
  for (size_t i = 0; i < kWrappers; ++i) {
    DeviceBuffer own(64 << 20);
    std::vector<DeviceBuffer> none;
    std::vector<Step> one{steps_on(own.get(), own.bytes(), false, none)[i]};
    alone.push_back(plan_all_then_run(one)[0]);
  }
  for (bool borrow_int : {false, true}) {
    INFO("int workspace given by the caller: " << borrow_int);
    DeviceBuffer shared(64 << 20);
    std::vector<DeviceBuffer> int_buffers;
    auto steps = steps_on(shared.get(), shared.bytes(), borrow_int, int_buffers);
    const auto got = plan_all_then_run(steps);
    REQUIRE(got.size() == alone.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("wrapper " << i << " (0, 1: ragged; 2: paged prefill; 3: decode)");
      CHECK(got[i] == alone[i]);
    }
  }
}

}  // namespace attnjit::test

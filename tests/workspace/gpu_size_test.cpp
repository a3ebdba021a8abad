// The wrappers' workspace_size() (FlashInfer's) against the plan() it sizes:
// a float workspace of exactly the reported bytes and an int workspace of
// exactly the reported bytes plan and run; one byte less of either is
// refused naming that workspace; the plan then reports the same two figures.
// A query between plan() and run() leaves the run's output bit for bit as
// without it, and a plan after a query is the plan without one. Batch decode
// (with and without CUDA-graph mode) and paged batch prefill, on random
// batches whose short queries over long KV split (so the float figure is not
// 0). Skips without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <functional>
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

std::vector<int32_t> random_lens(std::mt19937& rng, int batch, int most) {
  std::uniform_int_distribution<int> len(1, most);
  std::vector<int32_t> lens(batch);
  for (auto& l : lens) l = len(rng);
  return lens;
}

// One paged batch on the device (NHD), one query token per request.
struct DeviceBatch : DevicePagedBatch {
  DeviceBatch(const std::vector<int32_t>& lens, int page_size, uint32_t seed)
      : DevicePagedBatch(
            PagedBatchShape{lens, page_size, kHq, kHk, kD, kDt, kDt, KVLayout::NHD, static_cast<int64_t>(lens.size())},
            seed) {}
  int64_t rows() const { return shape.q_rows; }
  TensorView kc() const { return cache_view(k); }
  TensorView vc() const { return cache_view(v); }
  TensorView qv() const { return q_view(); }
};

// o and lse of one run, downloaded together.
std::vector<uint8_t> run_and_download(int64_t rows, const std::function<void(const TensorView&, const TensorView&)>& run) {
  DeviceBuffer o(size_t(rows) * kHq * kD * 2), lse(size_t(rows) * kHq * 4);
  o.poison();
  lse.poison();
  run(make_tensor(o.get(), kDt, {rows, kHq, kD}), make_tensor(lse.get(), DType::F32, {rows, kHq}));
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  auto a = o.download(), b = lse.download();
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void require_too_small(const std::function<void()>& plan, const char* workspace) {
  try {
    plan();
    FAIL("plan() accepted a " << workspace << " one byte smaller than workspace_size() reported");
  } catch (const Error& e) {
    CHECK(e.status() == Status::WorkspaceTooSmall);
    CHECK_THAT(e.what(), Catch::Contains(workspace));
  }
}

// A random batch of trial `trial`: batch + trial * step requests of up to
// `most` tokens each, its values seeded seed + trial.
struct Draw {
  int batch, step, most;
  uint32_t seed;
};

// One trial of a random-batch test: pages of 16 and of 1 in turn, the batch
// `a` that is planned and run, and the batch `other` that is only queried
// (drawn after `a` from the same generator).
struct Trial {
  int page_size;
  DeviceBatch a, other;
  Trial(std::mt19937& rng, int trial, const Draw& da, const Draw& dother)
      : page_size(trial % 2 ? 1 : 16),
        a(random_lens(rng, da.batch + trial * da.step, da.most), page_size, da.seed + trial),
        other(random_lens(rng, dother.batch + trial * dother.step, dother.most), page_size, dother.seed + trial) {}
};

// Four trials from one generator seeded `seed`, each INFOed: test(t, trial).
template <class Test>
void four_trials(uint32_t seed, const Draw& a, const Draw& other, const Test& test) {
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 4; ++trial) {
    const Trial t(rng, trial, a, other);
    INFO("trial " << trial << ": batch " << t.a.rows() << ", page_size " << t.page_size);
    test(t, trial);
  }
}

// Batch decode's calls over batch `a` with `args`.
struct DecodeCalls {
  using Wrapper = BatchDecodeWithPagedKVCacheWrapper;
  const DeviceBatch& a;
  Wrapper::PlanArgs args;
  WorkspaceSizes sizes(Wrapper& w) const { return w.workspace_size(a.host.indptr, a.host.indices, a.host.last, args); }
  void plan(Wrapper& w) const { w.plan(a.host.indptr, a.host.indices, a.host.last, args); }
  std::vector<uint8_t> run(Wrapper& w) const {
    return run_and_download(a.rows(), [&](const TensorView& o, const TensorView& lse) {
      w.run(a.qv(), a.kc(), a.vc(), o, &lse);
    });
  }
  static size_t float_bytes(const Wrapper& w) { return w.current_plan().workspace_bytes(); }
  // After a query of another batch (its figures `other`) between plan() and run().
  static void check_query(const Wrapper&, const WorkspaceSizes&, const WorkspaceSizes& other) {
    CHECK(other.int_bytes > 0);
  }
};

// Paged batch prefill's calls over batch `a` (qo_indptr `qo`) with `o`.
struct PrefillCalls {
  using Wrapper = BatchPrefillWithPagedKVCacheWrapper;
  const DeviceBatch& a;
  const std::vector<int32_t>& qo;
  int page_size;
  BatchPrefillPlanOptions o;
  WorkspaceSizes sizes(Wrapper& w) const {
    return w.workspace_size(qo, a.host.indptr, a.host.indices, a.host.last, kHq, kHk, kD, page_size, o);
  }
  void plan(Wrapper& w) const {
    w.plan(qo, a.host.indptr, a.host.indices, a.host.last, kHq, kHk, kD, page_size, o, nullptr);
  }
  std::vector<uint8_t> run(Wrapper& w) const {
    return run_and_download(a.rows(), [&](const TensorView& out, const TensorView& lse) {
      w.run(a.qv(), a.kc(), a.vc(), out, &lse, nullptr);
    });
  }
  static size_t float_bytes(const Wrapper& w) { return w.workspace_bytes(); }
  // After a query of another batch between plan() and run() (`sizes`: the plan's figures).
  static void check_query(const Wrapper& w, const WorkspaceSizes& sizes, const WorkspaceSizes&) {
    CHECK(w.workspace_bytes() == sizes.float_bytes);
  }
};

// What the tests check of a wrapper (`calls`: DecodeCalls or PrefillCalls over
// one batch; `make(ws, bytes)` makes a wrapper over a float workspace of
// `bytes`): a plan over room to spare reports the figures workspace_size()
// gave; a wrapper over exactly those bytes plans and runs as it does; one
// byte less of either workspace is refused, naming it. With `other` (the
// calls over another batch): the figures are not 0 and the exact plan uses
// all of the int workspace; a query of the other batch between plan() and
// run() leaves the run as it was; and a plan after a query is the plan
// without one.
template <class Calls, class Make>
void check_exact_sizes(const Calls& calls, const Make& make, const Calls* other = nullptr) {
  DeviceBuffer big(256 << 20);
  auto reference = make(big.get(), big.bytes());
  const WorkspaceSizes sizes = calls.sizes(reference);
  if (other) CHECK(sizes.int_bytes > 0);
  calls.plan(reference);
  CHECK(Calls::float_bytes(reference) == sizes.float_bytes);
  CHECK(reference.plan_memory_bytes() == sizes.int_bytes);
  const auto expected = calls.run(reference);

  // Exactly the reported bytes: plans and runs as with room to spare.
  DeviceBuffer fl(std::max<size_t>(sizes.float_bytes, 256)), in(sizes.int_bytes);
  auto exact = make(fl.get(), sizes.float_bytes);
  exact.set_int_workspace(in.get(), sizes.int_bytes);
  calls.plan(exact);
  if (other) CHECK(exact.plan_memory_bytes() == sizes.int_bytes);
  CHECK(calls.run(exact) == expected);

  // One byte less of either is refused, naming it.
  if (sizes.float_bytes > 0) {
    auto small = make(fl.get(), sizes.float_bytes - 1);
    require_too_small([&] { calls.plan(small); }, "float_workspace_buffer");
  }
  auto small_int = make(big.get(), big.bytes());
  small_int.set_int_workspace(in.get(), sizes.int_bytes - 1);
  require_too_small([&] { calls.plan(small_int); }, "int_workspace_buffer");
  if (!other) return;

  // A query of another batch between plan() and run() leaves the run as it was.
  const WorkspaceSizes other_sizes = other->sizes(exact);
  Calls::check_query(exact, sizes, other_sizes);
  CHECK(exact.plan_memory_bytes() == sizes.int_bytes);
  CHECK(calls.run(exact) == expected);
  // And a plan after a query is the plan without one.
  auto after = make(big.get(), big.bytes());
  other->sizes(after);
  calls.plan(after);
  CHECK(calls.run(after) == expected);
}

}  // namespace

TEST_CASE("batch decode: workspace_size() is exactly what plan() then needs, and disturbs nothing",
          "[gpu][workspace_size]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  four_trials(29, {1, 3, 5000, 100}, {7, 0, 3000, 200}, [&](const Trial& t, int) {
    const auto args = wrapper_plan_args(t.a.shape, -1);
    const DecodeCalls calls{t.a, args}, other{t.other, args};
    check_exact_sizes(
        calls, [&](void* ws, size_t bytes) { return BatchDecodeWithPagedKVCacheWrapper(rt, ws, bytes); }, &other);
  });
}

TEST_CASE("batch decode in CUDA-graph mode: workspace_size() sizes the fixed-grid plan", "[gpu][workspace_size]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  std::mt19937 rng(31);
  const DeviceBatch a(random_lens(rng, 5, 4000), 16, 300);
  const int max_batch = 8;
  const int64_t max_pages = a.host.num_pages + 64;
  DeviceBuffer indptr_buf((max_batch + 1) * 4), indices_buf(max_pages * 4), last_buf(max_batch * 4);
  auto make = [&](void* ws, size_t bytes) {
    return BatchDecodeWithPagedKVCacheWrapper(rt, ws, bytes, KVLayout::NHD, true, false,
                                              static_cast<int32_t*>(indptr_buf.get()),
                                              static_cast<int32_t*>(indices_buf.get()),
                                              static_cast<int32_t*>(last_buf.get()), max_batch, max_pages);
  };
  check_exact_sizes(DecodeCalls{a, wrapper_plan_args(a.shape, -1)}, make);
}

TEST_CASE("paged batch prefill: workspace_size() is exactly what plan() then needs, and disturbs nothing",
          "[gpu][workspace_size]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  // One query token per request over long KV: the plan splits the KV and uses the float workspace.
  four_trials(37, {2, 2, 6000, 400}, {5, 0, 2000, 500}, [&](const Trial& t, int trial) {
    std::vector<int32_t> qo(t.a.rows() + 1), other_qo(t.other.rows() + 1);
    for (size_t i = 0; i < qo.size(); ++i) qo[i] = static_cast<int32_t>(i);
    for (size_t i = 0; i < other_qo.size(); ++i) other_qo[i] = static_cast<int32_t>(i);
    BatchPrefillPlanOptions o;
    o.q_data_type = kDt;
    o.causal = trial % 2 == 0;
    const PrefillCalls calls{t.a, qo, t.page_size, o}, other{t.other, other_qo, t.page_size, o};
    check_exact_sizes(
        calls, [&](void* ws, size_t bytes) { return BatchPrefillWithPagedKVCacheWrapper(rt, ws, bytes); }, &other);
  });
}

}  // namespace attnjit::test

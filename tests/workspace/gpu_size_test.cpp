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

}  // namespace

TEST_CASE("batch decode: workspace_size() is exactly what plan() then needs, and disturbs nothing",
          "[gpu][workspace_size]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  std::mt19937 rng(29);
  for (int trial = 0; trial < 4; ++trial) {
    const int page_size = trial % 2 ? 1 : 16;
    const DeviceBatch a(random_lens(rng, 1 + trial * 3, 5000), page_size, 100 + trial);
    const DeviceBatch other(random_lens(rng, 7, 3000), page_size, 200 + trial);
    const auto args = wrapper_plan_args(a.shape, -1);
    INFO("trial " << trial << ": batch " << a.rows() << ", page_size " << page_size);
    DeviceBuffer big(256 << 20);
    BatchDecodeWithPagedKVCacheWrapper reference(rt, big.get(), big.bytes());
    const WorkspaceSizes sizes = reference.workspace_size(a.host.indptr, a.host.indices, a.host.last, args);
    CHECK(sizes.int_bytes > 0);
    reference.plan(a.host.indptr, a.host.indices, a.host.last, args);
    CHECK(reference.current_plan().workspace_bytes() == sizes.float_bytes);
    CHECK(reference.plan_memory_bytes() == sizes.int_bytes);
    const auto expected = run_and_download(a.rows(), [&](const TensorView& o, const TensorView& lse) {
      reference.run(a.qv(), a.kc(), a.vc(), o, &lse);
    });

    // Exactly the reported bytes: plans and runs as with room to spare.
    DeviceBuffer fl(std::max<size_t>(sizes.float_bytes, 256)), in(sizes.int_bytes);
    BatchDecodeWithPagedKVCacheWrapper exact(rt, fl.get(), sizes.float_bytes);
    exact.set_int_workspace(in.get(), sizes.int_bytes);
    exact.plan(a.host.indptr, a.host.indices, a.host.last, args);
    CHECK(exact.plan_memory_bytes() == sizes.int_bytes);
    CHECK(run_and_download(a.rows(), [&](const TensorView& o, const TensorView& lse) {
            exact.run(a.qv(), a.kc(), a.vc(), o, &lse);
          }) == expected);

    // One byte less of either is refused, naming it.
    if (sizes.float_bytes > 0) {
      BatchDecodeWithPagedKVCacheWrapper small(rt, fl.get(), sizes.float_bytes - 1);
      require_too_small([&] { small.plan(a.host.indptr, a.host.indices, a.host.last, args); },
                        "float_workspace_buffer");
    }
    BatchDecodeWithPagedKVCacheWrapper small_int(rt, big.get(), big.bytes());
    small_int.set_int_workspace(in.get(), sizes.int_bytes - 1);
    require_too_small([&] { small_int.plan(a.host.indptr, a.host.indices, a.host.last, args); },
                      "int_workspace_buffer");

    // A query of another batch between plan() and run() leaves the run as it was.
    const WorkspaceSizes other_sizes =
        exact.workspace_size(other.host.indptr, other.host.indices, other.host.last, args);
    CHECK(other_sizes.int_bytes > 0);
    CHECK(exact.plan_memory_bytes() == sizes.int_bytes);
    CHECK(run_and_download(a.rows(), [&](const TensorView& o, const TensorView& lse) {
            exact.run(a.qv(), a.kc(), a.vc(), o, &lse);
          }) == expected);
    // And a plan after a query is the plan without one.
    BatchDecodeWithPagedKVCacheWrapper after(rt, big.get(), big.bytes());
    after.workspace_size(other.host.indptr, other.host.indices, other.host.last, args);
    after.plan(a.host.indptr, a.host.indices, a.host.last, args);
    CHECK(run_and_download(a.rows(), [&](const TensorView& o, const TensorView& lse) {
            after.run(a.qv(), a.kc(), a.vc(), o, &lse);
          }) == expected);
  }
}

TEST_CASE("batch decode in CUDA-graph mode: workspace_size() sizes the fixed-grid plan", "[gpu][workspace_size]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  std::mt19937 rng(31);
  const DeviceBatch a(random_lens(rng, 5, 4000), 16, 300);
  const int max_batch = 8;
  const int64_t max_pages = a.host.num_pages + 64;
  DeviceBuffer indptr_buf((max_batch + 1) * 4), indices_buf(max_pages * 4), last_buf(max_batch * 4);
  DeviceBuffer big(256 << 20);
  auto make = [&](void* ws, size_t bytes) {
    return BatchDecodeWithPagedKVCacheWrapper(rt, ws, bytes, KVLayout::NHD, true, false,
                                              static_cast<int32_t*>(indptr_buf.get()),
                                              static_cast<int32_t*>(indices_buf.get()),
                                              static_cast<int32_t*>(last_buf.get()), max_batch, max_pages);
  };
  const auto args = wrapper_plan_args(a.shape, -1);
  auto reference = make(big.get(), big.bytes());
  const WorkspaceSizes sizes = reference.workspace_size(a.host.indptr, a.host.indices, a.host.last, args);
  reference.plan(a.host.indptr, a.host.indices, a.host.last, args);
  CHECK(reference.current_plan().workspace_bytes() == sizes.float_bytes);
  CHECK(reference.plan_memory_bytes() == sizes.int_bytes);
  const auto expected = run_and_download(a.rows(), [&](const TensorView& o, const TensorView& lse) {
    reference.run(a.qv(), a.kc(), a.vc(), o, &lse);
  });
  DeviceBuffer fl(std::max<size_t>(sizes.float_bytes, 256)), in(sizes.int_bytes);
  auto exact = make(fl.get(), sizes.float_bytes);
  exact.set_int_workspace(in.get(), sizes.int_bytes);
  exact.plan(a.host.indptr, a.host.indices, a.host.last, args);
  CHECK(run_and_download(a.rows(), [&](const TensorView& o, const TensorView& lse) {
          exact.run(a.qv(), a.kc(), a.vc(), o, &lse);
        }) == expected);
  if (sizes.float_bytes > 0) {
    auto small = make(fl.get(), sizes.float_bytes - 1);
    require_too_small([&] { small.plan(a.host.indptr, a.host.indices, a.host.last, args); }, "float_workspace_buffer");
  }
  auto small_int = make(big.get(), big.bytes());
  small_int.set_int_workspace(in.get(), sizes.int_bytes - 1);
  require_too_small([&] { small_int.plan(a.host.indptr, a.host.indices, a.host.last, args); }, "int_workspace_buffer");
}

TEST_CASE("paged batch prefill: workspace_size() is exactly what plan() then needs, and disturbs nothing",
          "[gpu][workspace_size]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  std::mt19937 rng(37);
  for (int trial = 0; trial < 4; ++trial) {
    const int page_size = trial % 2 ? 1 : 16;
    // One query token per request over long KV: the plan splits the KV and uses the float workspace.
    const DeviceBatch a(random_lens(rng, 2 + trial * 2, 6000), page_size, 400 + trial);
    const DeviceBatch other(random_lens(rng, 5, 2000), page_size, 500 + trial);
    std::vector<int32_t> qo(a.rows() + 1), other_qo(other.rows() + 1);
    for (size_t i = 0; i < qo.size(); ++i) qo[i] = static_cast<int32_t>(i);
    for (size_t i = 0; i < other_qo.size(); ++i) other_qo[i] = static_cast<int32_t>(i);
    BatchPrefillPlanOptions o;
    o.q_data_type = kDt;
    o.causal = trial % 2 == 0;
    INFO("trial " << trial << ": batch " << a.rows() << ", page_size " << page_size);
    auto plan = [&](BatchPrefillWithPagedKVCacheWrapper& w) {
      w.plan(qo, a.host.indptr, a.host.indices, a.host.last, kHq, kHk, kD, page_size, o, nullptr);
    };
    auto run = [&](BatchPrefillWithPagedKVCacheWrapper& w) {
      return run_and_download(a.rows(), [&](const TensorView& out, const TensorView& lse) {
        w.run(a.qv(), a.kc(), a.vc(), out, &lse, nullptr);
      });
    };
    DeviceBuffer big(256 << 20);
    BatchPrefillWithPagedKVCacheWrapper reference(rt, big.get(), big.bytes());
    const WorkspaceSizes sizes =
        reference.workspace_size(qo, a.host.indptr, a.host.indices, a.host.last, kHq, kHk, kD, page_size, o);
    CHECK(sizes.int_bytes > 0);
    plan(reference);
    CHECK(reference.workspace_bytes() == sizes.float_bytes);
    CHECK(reference.plan_memory_bytes() == sizes.int_bytes);
    const auto expected = run(reference);

    DeviceBuffer fl(std::max<size_t>(sizes.float_bytes, 256)), in(sizes.int_bytes);
    BatchPrefillWithPagedKVCacheWrapper exact(rt, fl.get(), sizes.float_bytes);
    exact.set_int_workspace(in.get(), sizes.int_bytes);
    plan(exact);
    CHECK(exact.plan_memory_bytes() == sizes.int_bytes);
    CHECK(run(exact) == expected);
    if (sizes.float_bytes > 0) {
      BatchPrefillWithPagedKVCacheWrapper small(rt, fl.get(), sizes.float_bytes - 1);
      require_too_small([&] { plan(small); }, "float_workspace_buffer");
    }
    BatchPrefillWithPagedKVCacheWrapper small_int(rt, big.get(), big.bytes());
    small_int.set_int_workspace(in.get(), sizes.int_bytes - 1);
    require_too_small([&] { plan(small_int); }, "int_workspace_buffer");

    // A query of another batch between plan() and run(), and a plan after a query.
    exact.workspace_size(other_qo, other.host.indptr, other.host.indices, other.host.last, kHq, kHk, kD, page_size,
                         o);
    CHECK(exact.plan_memory_bytes() == sizes.int_bytes);
    CHECK(exact.workspace_bytes() == sizes.float_bytes);
    CHECK(run(exact) == expected);
    BatchPrefillWithPagedKVCacheWrapper after(rt, big.get(), big.bytes());
    after.workspace_size(other_qo, other.host.indptr, other.host.indices, other.host.last, kHq, kHk, kD, page_size, o);
    plan(after);
    CHECK(run(after) == expected);
  }
}

}  // namespace attnjit::test

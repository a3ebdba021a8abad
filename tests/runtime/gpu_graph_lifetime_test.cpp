// A CUDA graph that captured a run keeps the plan memory it reads alive
// (PlanMemory::retain_while_captured): the wrapper or plan may be destroyed
// before the graph is replayed, and the replay still reads its plan and
// gives the same output; destroying the graph frees the memory. Before the
// fix such a replay read freed memory (an illegal address on the H100).
// Includes plan_memory.hpp: only there can the test see the freeing itself.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "attnjit/attnjit.hpp"
#include "plan_memory.hpp"
#include "reference/host_dtypes.hpp"
#include "support/captured_graph.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "support/decode_entry_args.hpp"
#include "support/paged_kv_device.hpp"

namespace attnjit::test {
namespace {

constexpr int kHq = 8, kHk = 2, kD = 128;
constexpr DType kDt = DType::BF16;

DeviceBuffer random_buffer(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-2.f, 2.f);
  std::vector<float> x(n);
  for (auto& e : x) e = uni(rng);
  std::vector<uint8_t> bytes;
  encode(kDt, x, bytes);
  DeviceBuffer d(bytes.size());
  d.upload(bytes);
  return d;
}

size_t free_device_bytes() {
  size_t free = 0, total = 0;
  ATTNJIT_CU(cuda::driver().MemGetInfo(&free, &total));
  return free;
}

// The driver drops a graph's references from its own thread, maybe after
// cuGraphDestroy returns: wait (up to 5 s) until free memory is back within
// `tolerance` of `baseline`, freeing what was handed back each time.
size_t free_after_release(size_t baseline, size_t tolerance) {
  size_t now = 0;
  for (int i = 0; i < 500; ++i) {
    detail::release_graph_held();
    now = free_device_bytes();
    if (now + tolerance >= baseline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return now;
}

}  // namespace

TEST_CASE("a captured graph keeps plan memory alive past its PlanMemory, and frees it when destroyed",
          "[gpu][graph][lifetime]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  const auto& cu = cuda::driver();
  NonBlockingStream stream;
  constexpr size_t kBlock = 64 << 20;  // large, so a leaked block shows in cuMemGetInfo
  detail::release_graph_held();
  const size_t baseline = free_device_bytes();
  for (int cycle = 0; cycle < 20; ++cycle) {
    INFO("cycle " << cycle);
    auto memory = std::make_unique<detail::PlanMemory>(0);
    memory->reserve(kBlock, stream.s);
    const CUdeviceptr block = memory->base();
    // A memset node stands for a kernel that writes the plan's block.
    const CapturedGraph g(stream.s, [&] {
      memory->retain_while_captured(stream.s);
      memory->retain_while_captured(stream.s);  // a second run in the same capture: one reference is enough
      ATTNJIT_CU(cu.MemsetD8Async(block, static_cast<unsigned char>(cycle + 1), kBlock, stream.s));
    });
    memory.reset();
    detail::release_graph_held();  // nothing to free yet: the graph holds the block
    g.launch(stream.s);
    ATTNJIT_CU(cu.StreamSynchronize(stream.s));
    std::vector<uint8_t> head(4096);
    REQUIRE(cu.MemcpyDtoH(head.data(), block, head.size()) == CUDA_SUCCESS);  // still allocated
    for (uint8_t b : head) REQUIRE(b == static_cast<uint8_t>(cycle + 1));
  }
  // 20 leaked blocks would be 1.25 GiB; allow other allocations' noise below one block.
  const size_t after = free_after_release(baseline, kBlock / 2);
  CHECK(after + kBlock / 2 >= baseline);

  SECTION("without a capture, destroying the PlanMemory frees the block at once") {
    auto memory = std::make_unique<detail::PlanMemory>(0);
    memory->reserve(kBlock, stream.s);
    memory->retain_while_captured(stream.s);  // not capturing: no reference taken
    memory.reset();
    CHECK(free_device_bytes() + kBlock / 2 >= baseline);
  }
}

TEST_CASE("a graph that captured a ragged batch prefill run replays correctly after the wrapper is destroyed",
          "[gpu][graph][lifetime]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  NonBlockingStream stream;
  std::mt19937 rng(31);
  // Short queries over long KV (split, so the plan has a work list and merge) and an odd size.
  const std::vector<int32_t> qo_indptr{0, 3, 4, 11, 48}, kv_indptr{0, 3001, 3334, 6233, 6300};
  const int64_t nq = qo_indptr.back(), nkv = kv_indptr.back();
  DeviceBuffer q = random_buffer(size_t(nq) * kHq * kD, rng), k = random_buffer(size_t(nkv) * kHk * kD, rng),
               v = random_buffer(size_t(nkv) * kHk * kD, rng);
  DeviceBuffer ws(128 << 20), o(size_t(nq) * kHq * kD * 2), lse(size_t(nq) * kHq * 4);
  const TensorView tq = make_tensor(q.get(), kDt, {nq, kHq, kD}), tk = make_tensor(k.get(), kDt, {nkv, kHk, kD}),
                   tv = make_tensor(v.get(), kDt, {nkv, kHk, kD}), to = make_tensor(o.get(), kDt, {nq, kHq, kD}),
                   tl = make_tensor(lse.get(), DType::F32, {nq, kHq});
  BatchPrefillPlanOptions opts;
  opts.q_data_type = kDt;
  opts.causal = true;

  auto w = std::make_unique<BatchPrefillWithRaggedKVCacheWrapper>(rt, ws.get(), ws.bytes());
  w->plan(qo_indptr, kv_indptr, kHq, kHk, kD, opts, stream.s);
  o.poison();
  lse.poison();
  w->run(tq, tk, tv, to, &tl, stream.s);
  ATTNJIT_CU(cu.StreamSynchronize(stream.s));
  const auto want_o = o.download(), want_lse = lse.download();

  const CapturedGraph g(stream.s, [&] { w->run(tq, tk, tv, to, &tl, stream.s); });
  w.reset();
  // Another wrapper's plan memory, allocated now, would take the freed block's place.
  auto other = std::make_unique<BatchPrefillWithRaggedKVCacheWrapper>(rt, ws.get(), ws.bytes());
  other->plan({0, 1, 2, 3, 4}, {0, 9, 18, 27, 36}, kHq, kHk, kD, opts, stream.s);
  ATTNJIT_CU(cu.StreamSynchronize(stream.s));
  for (int replay = 0; replay < 2; ++replay) {
    INFO("replay " << replay);
    o.poison();
    lse.poison();
    g.launch(stream.s);
    REQUIRE(cu.StreamSynchronize(stream.s) == CUDA_SUCCESS);
    CHECK(o.download() == want_o);  // the same kernels on the same plan: bit for bit
    CHECK(lse.download() == want_lse);
  }
}

TEST_CASE("a graph that captured a batch decode wrapper's run replays correctly after the wrapper is destroyed",
          "[gpu][graph][lifetime]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  NonBlockingStream stream;
  // Four requests, one query token each, over 16-token pages (NHD).
  DevicePagedBatch b(PagedBatchShape{{2001, 17, 4500, 1}, 16, kHq, kHk, kD, kDt, kDt, KVLayout::NHD, 4}, 37);
  const PagedBatch& pb = b.host;
  const int64_t B = b.batch();
  DeviceBuffer ws(128 << 20);
  DeviceBuffer &o = b.out, &lse = b.lse;
  const TensorView kc = b.cache_view(b.k), vc = b.cache_view(b.v);
  const TensorView tq = b.q_view(), to = b.out_view(), tl = b.lse_view();
  const auto args = wrapper_plan_args(b.shape, -1);

  for (bool use_cuda_graph : {false, true}) {
    INFO("use_cuda_graph " << use_cuda_graph);
    // CUDA-graph mode: the page table in fixed buffers of the caller's, the work list in plan memory.
    DeviceBuffer indptr_buf(4 * (B + 1)), indices_buf(4 * pb.indices.size()), last_buf(4 * B);
    auto w = std::make_unique<BatchDecodeWithPagedKVCacheWrapper>(
        rt, ws.get(), ws.bytes(), KVLayout::NHD, use_cuda_graph, false,
        use_cuda_graph ? static_cast<int32_t*>(indptr_buf.get()) : nullptr,
        use_cuda_graph ? static_cast<int32_t*>(indices_buf.get()) : nullptr,
        use_cuda_graph ? static_cast<int32_t*>(last_buf.get()) : nullptr, use_cuda_graph ? int(B) : 0,
        use_cuda_graph ? int64_t(pb.indices.size()) : 0);
    w->plan(pb.indptr, pb.indices, pb.last, args, stream.s);
    o.poison();
    lse.poison();
    w->run(tq, kc, vc, to, &tl, {}, {}, stream.s);
    ATTNJIT_CU(cu.StreamSynchronize(stream.s));
    const auto want_o = o.download(), want_lse = lse.download();

    const CapturedGraph g(stream.s, [&] { w->run(tq, kc, vc, to, &tl, {}, {}, stream.s); });
    w.reset();
    auto other = std::make_unique<BatchDecodeWithPagedKVCacheWrapper>(rt, ws.get(), ws.bytes());
    other->plan({0, 1, 2}, {0, 1}, {3, 5}, args, stream.s);
    ATTNJIT_CU(cu.StreamSynchronize(stream.s));
    o.poison();
    lse.poison();
    g.launch(stream.s);
    REQUIRE(cu.StreamSynchronize(stream.s) == CUDA_SUCCESS);
    CHECK(o.download() == want_o);
    CHECK(lse.download() == want_lse);
  }
}

}  // namespace attnjit::test

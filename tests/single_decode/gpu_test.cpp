// single_decode_with_kv_cache on the GPU against the double-precision CPU
// reference, over the parameter grid the operator claims. Skips without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <future>
#include <map>
#include <random>

#include "attnjit/attnjit.hpp"
#include "support/captured_graph.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "support/grid_tally.hpp"
#include "support/parallel_prewarm.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "reference/decode_grid.hpp"
#include "reference/decode_reference.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {
namespace {

using Case = DecodeCase;

// Relative L2 error of o, and absolute error of lse (base 2), by q's dtype:
// the tensor cores take q, k (after RoPE) and p rounded to that dtype. lse is
// compared absolutely: dividing by |lse| would hide losses at long lengths.
double tolerance(DType q) { return q == DType::BF16 ? 1e-2 : 2e-3; }
double lse_tolerance(DType q) { return q == DType::BF16 ? 2e-2 : 4e-3; }

struct Errors {
  double o_rel = 0, lse_abs = 0;
};

Errors run_case(const Runtime& rt, const Case& c, uint32_t seed) {
  const auto& p = c.p;
  const int64_t H = p.num_qo_heads, Hk = p.num_kv_heads, D = p.head_dim, N = p.kv_len;
  cuda::ScopedDevice scope(p.device);  // test buffers live in the device's primary context
  std::mt19937 rng(seed);
  auto randv = [&](size_t n, float scale) { return random_values(rng, n, scale); };
  std::vector<uint8_t> qb, kb, vb;
  // Large enough logits that the softmax is far from uniform.
  const auto q = encode(p.q_dtype, randv(H * D, 2.f), qb);
  const auto k = encode(p.kv_dtype, randv(N * Hk * D, 2.f), kb);
  const auto v = encode(p.kv_dtype, randv(N * Hk * D, 1.f), vb);

  DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), dout(H * D * dtype_size(p.q_dtype)), dlse(H * 4);
  dq.upload(qb);
  dk.upload(kb);
  dv.upload(vb);
  dout.poison();
  dlse.poison();

  SingleDecodePlan plan(rt, p);
  DeviceBuffer ws(plan.workspace_bytes());
  const bool nhd = p.options.kv_layout == KVLayout::NHD;
  // Views on the problem's device: the plan refuses tensors from another one.
  TensorView tq = make_tensor(dq.get(), p.q_dtype, {H, D}, p.device);
  TensorView tk = make_tensor(dk.get(), p.kv_dtype, nhd ? std::initializer_list<int64_t>{N, Hk, D} : std::initializer_list<int64_t>{Hk, N, D}, p.device);
  TensorView tv = make_tensor(dv.get(), p.kv_dtype, nhd ? std::initializer_list<int64_t>{N, Hk, D} : std::initializer_list<int64_t>{Hk, N, D}, p.device);
  TensorView to = make_tensor(dout.get(), p.q_dtype, {H, D}, p.device);
  TensorView tl = make_tensor(dlse.get(), DType::F32, {H}, p.device);
  plan.run(tq, tk, tv, to, c.with_lse ? &tl : nullptr, ws.get(), ws.bytes(), nullptr);
  ATTNJIT_CU(cuda::driver().CtxSynchronize());

  const auto out = decode(p.q_dtype, dout.download());
  const auto lse = decode(DType::F32, dlse.download());
  const auto ref = reference_single_decode(p, q, k, v);

  Errors e;
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      FAIL_CHECK(c.label() << ": o[" << i << "] = " << out[i] << " (not written or not finite)");
      return {INFINITY, INFINITY};
    }
    num += (out[i] - ref.o[i]) * (out[i] - ref.o[i]);
    den += ref.o[i] * ref.o[i];
  }
  e.o_rel = std::sqrt(num / std::max(den, 1e-30));
  if (c.with_lse)
    for (int64_t h = 0; h < H; ++h) e.lse_abs = std::max(e.lse_abs, std::fabs(lse[h] - ref.lse[h]));
  return e;
}

}  // namespace

TEST_CASE("single decode matches the float64 reference across the grid", "[gpu][decode]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  auto cases = decode_grid_from_env();  // ATTNJIT_TEST_GRID=reduced: tools/gpu/sanitize.sh
  if (const char* quick = std::getenv("ATTNJIT_TEST_QUICK")) {
    // A smoke subset for quick iterations: every 7th case.
    std::vector<Case> sub;
    for (size_t i = 0; i < cases.size(); i += 7) sub.push_back(cases[i]);
    cases.swap(sub);
  }
  prewarm_grid(rt, cases, ops::single_decode_kernels);
  GridTally tally;  // by dtype pair, core kind and RoPE
  uint32_t seed = 1;
  for (const auto& c : cases) {
    INFO(c.label());
    Errors e = run_case(rt, c, seed++);
    const bool tc = ops::plan_single_decode(c.p, {}).decode.spec.as<DecodeKernel>()->tensor_cores;
    const bool rope = c.p.options.pos_encoding_mode == PosEncoding::RopeLlama;
    // RoPE on tensor cores keeps the rotated q and k unrounded (decode_mma.cuh:
    // kSplitQK): held to the CUDA-core path's order of lse error.
    if (tc && rope) CHECK(e.lse_abs <= 1e-3);
    tally.check(fmt::format("{}/{} {}{}", to_string(c.p.q_dtype), to_string(c.p.kv_dtype), tc ? "tc" : "cuda",
                            rope ? " rope" : ""),
                e.o_rel, tolerance(c.p.q_dtype), e.lse_abs, lse_tolerance(c.p.q_dtype));
  }
  WARN(tally.summary("single decode grid", 28));
}

TEST_CASE("single decode runs inside a CUDA graph and replays", "[gpu][decode][graph]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  const SingleDecodeProblem p = d128_decode_problem(32, 8, 20000);
  SingleDecodePlan plan(rt, p);
  REQUIRE(plan.num_splits() > 1);  // exercise the merge kernel in the graph too
  std::mt19937 rng(7);
  auto randv = [&](size_t n) { return random_values(rng, n, 1.f); };
  std::vector<uint8_t> qb, kb, vb;
  auto q = encode(p.q_dtype, randv(32 * 128), qb);
  auto k = encode(p.kv_dtype, randv(p.kv_len * 8 * 128), kb);
  auto v = encode(p.kv_dtype, randv(p.kv_len * 8 * 128), vb);
  DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), dout(32 * 128 * 2), ws(plan.workspace_bytes());
  dq.upload(qb); dk.upload(kb); dv.upload(vb); dout.poison();
  auto tq = make_tensor(dq.get(), p.q_dtype, {32, 128});
  auto tk = make_tensor(dk.get(), p.kv_dtype, {p.kv_len, 8, 128});
  auto tv = make_tensor(dv.get(), p.kv_dtype, {p.kv_len, 8, 128});
  auto to = make_tensor(dout.get(), p.q_dtype, {32, 128});

  CUstream stream;
  ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  // Global capture mode: any allocation or synchronization inside run() would
  // invalidate the capture, so a clean capture proves run() does neither.
  const CapturedGraph graph(stream, [&] { plan.run(tq, tk, tv, to, nullptr, ws.get(), ws.bytes(), stream); });
  for (int i = 0; i < 3; ++i) graph.launch(stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  const auto ref = reference_single_decode(p, q, k, v);
  CHECK(relative_l2(decode(p.q_dtype, dout.download()), ref.o) <= 1e-2);
  cu.StreamDestroy(stream);
}

TEST_CASE("single decode works on every device of the process", "[gpu][decode][multi]") {
  ATTNJIT_REQUIRE_GPU();
  int n = 0;
  ATTNJIT_CU(cuda::driver().DeviceGetCount(&n));
  if (n < 2) {
    WARN("SKIPPED (one GPU): multi-device check needs 2+ devices; this machine has " << n);
    return;
  }
  Runtime rt;
  for (int dev = 0; dev < n; ++dev) {
    cuda::ScopedDevice scope(dev);
    Case c;
    c.p.num_qo_heads = 8; c.p.num_kv_heads = 2; c.p.head_dim = 128; c.p.kv_len = 3000;
    c.p.q_dtype = c.p.kv_dtype = DType::F16; c.p.device = dev;
    Errors e = run_case(rt, c, 99 + dev);
    CHECK(e.o_rel <= 2e-3);
  }
}

TEST_CASE("one-call single decode from 8 threads on 4 streams, each with its own shapes", "[gpu][decode][concurrency]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  std::vector<CUstream> streams(4);
  for (auto& s : streams) ATTNJIT_CU(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // Every thread's problem splits the KV (so all of them need a workspace at
  // once), with different head counts and lengths (so different sizes).
  auto worker = [&](int t) -> double {
    cuda::ScopedDevice dev(0);
    SingleDecodeProblem p;
    p.num_kv_heads = 1 + t % 3;
    p.num_qo_heads = p.num_kv_heads * (1 + t % 4);
    p.head_dim = t % 2 ? 128 : 64;
    p.kv_len = 6000 + 1777 * t;
    p.q_dtype = p.kv_dtype = DType::F16;
    const int64_t H = p.num_qo_heads, Hk = p.num_kv_heads, D = p.head_dim, N = p.kv_len;
    std::mt19937 rng(500 + t);
    auto randv = [&](size_t n, float sc) { return random_values(rng, n, sc); };
    std::vector<uint8_t> qb, kb, vb;
    const auto q = encode(p.q_dtype, randv(H * D, 2.f), qb);
    const auto k = encode(p.kv_dtype, randv(N * Hk * D, 2.f), kb);
    const auto v = encode(p.kv_dtype, randv(N * Hk * D, 1.f), vb);
    DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), dout(H * D * 2), dlse(H * 4);
    dq.upload(qb); dk.upload(kb); dv.upload(vb);
    const auto ref = reference_single_decode(p, q, k, v);
    double worst = 0;
    for (int rep = 0; rep < 20; ++rep) {
      dout.poison();
      const CUstream stream = streams[t % 4];
      single_decode_with_kv_cache(rt, make_tensor(dq.get(), p.q_dtype, {H, D}), make_tensor(dk.get(), p.kv_dtype, {N, Hk, D}),
                                  make_tensor(dv.get(), p.kv_dtype, {N, Hk, D}), make_tensor(dout.get(), p.q_dtype, {H, D}),
                                  nullptr, {}, stream);
      ATTNJIT_CU(cu.StreamSynchronize(stream));
      worst = std::max(worst, relative_l2(decode(p.q_dtype, dout.download()), ref.o));
    }
    return worst;
  };
  std::vector<std::future<double>> results;
  for (int t = 0; t < 8; ++t) results.push_back(std::async(std::launch::async, worker, t));
  for (int t = 0; t < 8; ++t) {
    INFO("thread " << t);
    CHECK(results[t].get() <= 2e-3);
  }
  for (auto& s : streams) cu.StreamDestroy(s);
}

}  // namespace attnjit::test

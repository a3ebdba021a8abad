// Prefill at head_dim 512 without a GPU: the fa2 skeleton splits V and O
// into two 256-wide slices, one CTA each (prefill_vo_parts), so single and
// batch plans launch twice the CTAs of the items; fa3 refuses 512 by name,
// "auto" takes fa2; a device whose blocks hold less shared memory than the
// kernel's 116,736 B is refused naming head_dim and the arch; and the 512
// variants compile with NVRTC for sm_80 and sm_90a. The GPU side:
// tests/batch_prefill/gpu_test.cpp and gpu_graph_d512_test.cpp ([gpu][prefill][d512]).
#include <catch2/catch.hpp>

#include "attnjit/error.hpp"
#include "support/error_capture.hpp"
#include "support/nvrtc_compiles.hpp"
#include "support/prefill_problems.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "ops/single_prefill/single_prefill_problem.hpp"
#include "prefill_params.h"
#include "spec/prefill_kernel.hpp"

using namespace attnjit;
using attnjit::test::error_of;
using attnjit::test::prefill_of;

namespace {

SinglePrefillProblem single(int64_t qo, int64_t kv, int hq = 14, int hk = 2) {
  return test::single_prefill_problem(qo, kv, hq, hk, 512);
}

ops::BatchPrefillShape batch(const std::vector<int32_t>& qo_lens, std::vector<int32_t> kv_lens, KVSource source) {
  ops::BatchPrefillShape s = test::batch_prefill_shape(qo_lens, std::move(kv_lens), 12, 4, 512, DType::F16);
  s.source = source;
  s.num_page_indices = 1000;
  return s;
}

ops::DeviceFigures device(const char* arch, int smem_per_block) {
  ops::DeviceFigures d;
  d.arch = arch;
  d.smem_per_block = smem_per_block;
  return d;
}

}  // namespace

TEST_CASE("head_dim 512 prefill: one stage of 32 keys, two CTAs per item, 116,736 B", "[prefill][planner][d512]") {
  CHECK(kernels::prefill_vo_parts(512) == 2);
  for (int d : {64, 128, 256}) CHECK(kernels::prefill_vo_parts(d) == 1);
  CHECK(kernels::prefill_tile_kv(512, 1) == 32);
  // Q 64 x (512 + 8), K 32 x (512 + 8), V 32 x (256 + 8), 16-bit.
  CHECK(kernels::prefill_smem_bytes(512, 1, 1) == 116736);
  // The other head dims keep their sizes (Q, K and V tiles all the head wide).
  CHECK(kernels::prefill_smem_bytes(256, 1, 1) == (64 + 2 * 64) * 264 * 2);
  CHECK(kernels::prefill_smem_bytes(128, 2, 3) == (128 + 2 * 3 * 64) * 136 * 2);
}

TEST_CASE("single prefill at head_dim 512 is planned on fa2 with twice the CTAs", "[prefill][planner][d512]") {
  for (int64_t qo : {1, 7, 100, 1000})
    for (int64_t kv : {qo, qo + 33, int64_t(20000)})
      for (bool causal : {false, true}) {
        auto p = single(qo, kv);
        p.options.causal = causal;
        INFO("qo=" << qo << " kv=" << kv << " causal=" << causal);
        const auto L = ops::plan_single_prefill(p, {132});  // sm_90a: "auto" would pick fa3 below 512
        const PrefillKernel& k = prefill_of(L.prefill);
        CHECK(k.backend == PrefillBackend::Fa2);
        CHECK(k.head_dim == 512);
        CHECK(k.frags_m == 1);
        CHECK(k.stages == 1);
        CHECK(k.tile_kv() == 32);
        CHECK(L.prefill.shape.smem_bytes == 116736);
        CHECK(L.prefill.shape.grid[0] == uint32_t(L.num_q_tiles * p.num_kv_heads * 2));
        CHECK(L.prefill.shape.grid[1] == uint32_t(L.num_chunks));
        CHECK(int64_t(L.num_q_tiles) * k.tile_q() >= qo * 7);
        CHECK(L.chunk_size % k.tile_kv() == 0);
        if (L.num_chunks > 1)  // the merge reads whole 512-wide rows: both CTAs' slices
          CHECK(L.workspace.region("partial_o").bytes == size_t(L.num_chunks) * qo * 14 * 512 * 4);
      }
  // A short query on a long KV splits it (so the merge runs at 512).
  CHECK(ops::plan_single_prefill(single(1, 20000), {132}).num_chunks > 1);
}

TEST_CASE("head_dim 512 with backend fa3 is UNSUPPORTED naming head_dim; fa2 and auto plan it", "[prefill][planner][d512]") {
  auto p = single(100, 200);
  p.options.backend = "fa3";
  const std::string msg = error_of([&] { ops::plan_single_prefill(p, {132}); }, Status::Unsupported);
  CHECK_THAT(msg, Catch::Contains("backend='fa3'") && Catch::Contains("head_dim=512") && Catch::Contains("'fa2'"));
  // The prewarm list refuses it too (the problem's validation), and so does the warp-specialized fa3.
  CHECK_THAT(error_of([&] { ops::single_prefill_kernels(p); }, Status::Unsupported), Catch::Contains("head_dim=512"));
  p.options.backend = "fa3_ws";
  CHECK_THAT(error_of([&] { ops::plan_single_prefill(p, {132}); }, Status::Unsupported),
             Catch::Contains("backend='fa3_ws'") && Catch::Contains("head_dim=512"));
  auto b = batch({5, 9}, {40, 70}, KVSource::Paged);
  b.options.backend = "fa3";
  CHECK_THAT(error_of([&] { ops::plan_batch_prefill(b, {132}); }, Status::Unsupported),
             Catch::Contains("head_dim=512"));
  for (const char* backend : {"fa2", "auto"}) {
    p.options.backend = backend;
    CHECK(prefill_of(ops::plan_single_prefill(p, {132}).prefill).backend == PrefillBackend::Fa2);
  }
  // The prewarm lists hold no fa3 kernel at 512 (its spec would be invalid).
  p.options.backend = "auto";
  for (const auto& s : ops::single_prefill_kernels(p))
    if (const auto* k = s.as<PrefillKernel>()) CHECK(k->backend == PrefillBackend::Fa2);
  // The spec itself refuses fa3, two fragments and a ring of stages at 512.
  PrefillKernel k = prefill_of(ops::plan_single_prefill(p, {132}).prefill);
  CHECK_NOTHROW(k.validate());
  CHECK(PrefillKernel::from_json(k.to_json()) == k);
  auto spec_error = [&](auto change) {
    PrefillKernel bad = k;
    change(bad);
    return error_of([&] { bad.validate(); }, Status::InvalidArgument);
  };
  CHECK_THAT(spec_error([](PrefillKernel& s) { s.frags_m = 2; }), Catch::Contains("frags_m=2") &&
                                                                    Catch::Contains("1 for head_dim 512"));
  CHECK_THAT(spec_error([](PrefillKernel& s) { s.stages = 2; }), Catch::Contains("stages=2") &&
                                                                   Catch::Contains("1 for head_dim 512"));
  CHECK_THAT(spec_error([](PrefillKernel& s) {
               s.backend = PrefillBackend::Fa3;
               s.stages = 2;
             }),
             Catch::Contains("head_dim=512") && Catch::Contains("512 takes fa2"));
}

TEST_CASE("head_dim 512 prefill is refused where a block's shared memory is too small", "[prefill][planner][d512]") {
  const auto p = single(300, 300);
  // sm_86 / sm_89 / sm_120: 99 KiB per block.
  const std::string msg =
      error_of([&] { ops::plan_single_prefill(p, device("sm_86", 99 * 1024)); }, Status::Unsupported);
  CHECK_THAT(msg, Catch::Contains("head_dim=512") && Catch::Contains("sm_86") && Catch::Contains("116736"));
  CHECK_THAT(error_of([&] { ops::plan_batch_prefill(batch({3}, {9}, KVSource::Ragged), device("sm_89", 99 * 1024)); },
                      Status::Unsupported),
             Catch::Contains("head_dim=512") && Catch::Contains("sm_89"));
  // A100: 163 KiB.
  const auto L = ops::plan_single_prefill(p, device("sm_80", 163 * 1024));
  CHECK(prefill_of(L.prefill).backend == PrefillBackend::Fa2);
  // The other head dims are not checked here (planned for sm_90 as before).
  auto d256 = p;
  d256.head_dim = 256;
  CHECK_NOTHROW(ops::plan_single_prefill(d256, device("sm_86", 99 * 1024)));
}

TEST_CASE("batch prefill at head_dim 512: two CTAs per work item; CUDA-graph mode keeps its grid",
          "[prefill][planner][d512]") {
  for (KVSource source : {KVSource::Ragged, KVSource::Paged}) {
    INFO(to_string(source));
    auto s = batch({1, 37, 200}, {1, 100, 3000}, source);
    const auto L = ops::plan_batch_prefill(s, {132});
    const PrefillKernel& k = prefill_of(L.prefill);
    CHECK(k.backend == PrefillBackend::Fa2);
    CHECK(k.head_dim == 512);
    CHECK(k.kv_source == source);
    CHECK(L.prefill.shape.grid[0] == uint32_t(L.num_work * 2));
    CHECK(L.prefill.shape.smem_bytes == 116736);
    // An append of one token to a long KV splits it.
    const auto split = ops::plan_batch_prefill(batch({1}, {30000}, source), {132});
    CHECK(split.num_chunks > 1);
    CHECK(split.prefill.shape.grid[0] == uint32_t(split.num_work * 2));
    CHECK(split.workspace.region("partial_o").bytes == size_t(split.num_chunks) * 12 * 512 * 4);

    s.graph_max_batch = 8;  // persistent CTAs take the (item, slice) pairs from the counter
    const auto G = ops::plan_batch_prefill(s, {132});
    CHECK(prefill_of(G.prefill).head_dim == 512);
    CHECK(G.prefill.shape.grid[0] == 132u);  // one CTA per SM: 116,736 B each
  }
}


TEST_CASE("the head_dim 512 prefill variants compile with NVRTC", "[nvrtc][prefill][d512]") {
  std::vector<KernelSpec> specs;
  {
    auto p = single(100, 300);  // contiguous, causal with RoPE
    p.options.causal = true;
    p.options.pos_encoding_mode = PosEncoding::RopeLlama;
    specs.push_back(ops::plan_single_prefill(p, {132}).prefill.spec);
    p.options.pos_encoding_mode = PosEncoding::Alibi;  // custom mask, ALiBi, soft cap, window
    p.options.custom_mask = true;
    p.options.logits_soft_cap = 30.f;
    p.options.window_left = 64;
    specs.push_back(ops::plan_single_prefill(p, {132}).prefill.spec);
  }
  {
    auto s = batch({5, 70}, {90, 400}, KVSource::Ragged);  // ragged, custom mask
    s.options.custom_mask = true;
    s.mask_bytes = 100;
    specs.push_back(ops::plan_batch_prefill(s, {132}).prefill.spec);
    s = batch({5, 70}, {90, 400}, KVSource::Paged);  // paged, fp8 K/V, causal
    s.kv_dtype = DType::E4M3;
    specs.push_back(ops::plan_batch_prefill(s, {132}).prefill.spec);
    s.kv_dtype = DType::F16;  // paged with RoPE
    s.options.pos_encoding_mode = PosEncoding::RopeLlama;
    specs.push_back(ops::plan_batch_prefill(s, {132}).prefill.spec);
  }
  for (const auto& s : specs) {
    REQUIRE(s.as<PrefillKernel>());
    CHECK(s.as<PrefillKernel>()->head_dim == 512);
    test::check_compiles(s);
  }
}

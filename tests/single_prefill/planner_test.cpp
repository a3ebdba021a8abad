// Single prefill's planner and checks, on the CPU: the query tiles and KV
// chunks cover the problem exactly, short queries against long KV split it,
// and bad problems fail with errors that name the argument, its value and
// what is allowed.
#include <catch2/catch.hpp>

#include <algorithm>

#include "attnjit/prefill.hpp"
#include "engine.hpp"
#include "support/error_capture.hpp"
#include "support/prefill_problems.hpp"
#include "support/scoped_env.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/registry.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "ops/single_prefill/single_prefill_problem.hpp"
#include "spec/kernel_spec.hpp"

using namespace attnjit;
using attnjit::test::error_of;

namespace {

SinglePrefillProblem problem(int64_t qo, int64_t kv, int hq = 32, int hk = 8, int d = 128) {
  return test::single_prefill_problem(qo, kv, hq, hk, d);
}

}  // namespace

TEST_CASE("single prefill plan: tiles cover the packed query rows, chunks cover the KV", "[prefill][planner]") {
  for (int64_t qo : {1, 7, 64, 100, 1000, 16384})
    for (int64_t kv : {qo, qo + 1, int64_t(4096), int64_t(100000)}) {
      if (kv < qo) continue;
      for (auto [hq, hk] : {std::pair{32, 8}, {12, 4}, {8, 8}, {8, 1}}) {
        for (int d : {64, 128, 256}) {
          auto p = problem(qo, kv, hq, hk, d);
          p.options.causal = true;
          const auto L = ops::plan_single_prefill(p, {132});
          INFO("qo=" << qo << " kv=" << kv << " heads " << hq << "/" << hk << " d=" << d);
          const auto* k = L.prefill.spec.as<PrefillKernel>();
          REQUIRE(k);
          const int64_t packed = qo * (hq / hk);
          // Every packed row in exactly one tile, no tile empty.
          CHECK(int64_t(L.num_q_tiles) * k->tile_q() >= packed);
          CHECK(int64_t(L.num_q_tiles - 1) * k->tile_q() < packed);
          CHECK(L.prefill.shape.grid[0] == uint32_t(L.num_q_tiles * hk));
          CHECK_FALSE(L.tiles_fastest);  // causal: KV heads fastest, the tiles that see the most keys first
          CHECK(L.prefill.shape.grid[2] == 1u);
          // Chunks: tile-aligned, covering [0, kv), none empty.
          CHECK(L.chunk_size % k->tile_kv() == 0);
          CHECK(int64_t(L.num_chunks) * L.chunk_size >= kv);
          CHECK(int64_t(L.num_chunks - 1) * L.chunk_size < kv);
          CHECK(L.prefill.shape.grid[1] == uint32_t(L.num_chunks));
          CHECK(L.merge.has_value() == (L.num_chunks > 1));
          if (L.num_chunks > 1) {
            CHECK(L.workspace.region("partial_o").bytes == size_t(L.num_chunks) * qo * hq * d * 4);
            CHECK(L.workspace.region("partial_lse").bytes == size_t(L.num_chunks) * qo * hq * 4);
            CHECK(L.merge->shape.grid[0] == uint32_t(qo * hq));
          }
          CHECK(L.prefill.shape.smem_bytes == uint32_t(k->dynamic_smem_bytes()));
          CHECK(k->dynamic_smem_bytes() <= 227 * 1024);
        }
      }
    }
}

TEST_CASE("single prefill plan: an append of few tokens to a long cache splits the KV; a long prefill does not",
          "[prefill][planner]") {
  const auto append = ops::plan_single_prefill(problem(16, 32768), {132});
  CHECK(append.num_chunks > 1);
  // About one wave (chunks are whole KV tiles, so the count rounds; never a
  // second wave for a few CTAs).
  const auto* ak = append.prefill.spec.as<PrefillKernel>();
  const int64_t wave = 132 * ops::prefill_ctas_per_sm(*ak);
  CHECK(int64_t(append.num_q_tiles) * append.num_chunks * 8 >= wave * 9 / 10);
  CHECK(int64_t(append.num_q_tiles) * append.num_chunks * 8 <= wave);
  const auto decode_like = ops::plan_single_prefill(problem(1, 100000, 8, 1), {132});
  CHECK(decode_like.num_chunks > 16);
  const auto long_prefill = ops::plan_single_prefill(problem(8192, 8192), {132});
  CHECK(long_prefill.num_chunks == 1);
  CHECK_FALSE(long_prefill.merge.has_value());
  const auto short_kv = ops::plan_single_prefill(problem(4, 300), {132});
  CHECK(short_kv.num_chunks == 1);  // too few keys to be worth a merge
  // A short square prefill leaves SMs idle, but splitting it cost more than
  // it bought on an H100 (512 x 512, d 64: 60 TFLOP/s split, 146 unsplit):
  // FlashAttention's grid points as one request, on both backends.
  for (const char* arch : {"sm_90a", "sm_80"})
    for (int64_t n : {512, 1024, 2048})
      for (int d : {64, 128, 256}) {
        INFO(arch << " n=" << n << " d=" << d);
        ops::DeviceFigures dev;
        dev.arch = arch;
        CHECK(ops::plan_single_prefill(problem(n, n, 2048 / d, 2048 / d, d), dev).num_chunks == 1);
      }
}

TEST_CASE("single prefill plan: tiles of equal cost run one KV head's side by side", "[prefill][planner]") {
  auto p = problem(16384, 16384);
  CHECK(ops::plan_single_prefill(p, {132}).tiles_fastest);  // no mask: every tile sees every key
  p.options.causal = true;
  CHECK_FALSE(ops::plan_single_prefill(p, {132}).tiles_fastest);
  p.options.custom_mask = true;  // causal is ignored with a custom mask
  CHECK(ops::plan_single_prefill(p, {132}).tiles_fastest);
  p.options.custom_mask = p.options.causal = false;
  p.options.window_left = 1024;  // the first tiles see fewer keys
  CHECK_FALSE(ops::plan_single_prefill(p, {132}).tiles_fastest);
}

TEST_CASE("single prefill plan: the variant follows the options", "[prefill][planner]") {
  auto p = problem(128, 512);
  p.options.causal = true;
  p.options.pos_encoding_mode = PosEncoding::RopeLlama;
  p.options.logits_soft_cap = 30.f;
  p.options.window_left = 64;
  auto k = *ops::plan_single_prefill(p, {132}).prefill.spec.as<PrefillKernel>();
  CHECK(k.variant.mask == MaskMode::Causal);
  CHECK(k.variant.soft_cap);
  CHECK(k.window);
  CHECK(k.variant.pos_encoding == PosEncoding::RopeLlama);
  p.options.custom_mask = true;  // a custom mask replaces causal
  k = *ops::plan_single_prefill(p, {132}).prefill.spec.as<PrefillKernel>();
  CHECK(k.variant.mask == MaskMode::Custom);
  // Run-time values never enter the spec: lengths, sm_scale, rope theta, window size.
  auto a = problem(1000, 4000), b = problem(3000, 3000);  // both long enough for the 128-row tile
  a.options.sm_scale = 0.1f;
  b.options.rope_theta = 5e5f;
  CHECK(ops::plan_single_prefill(a, {132}).prefill.spec == ops::plan_single_prefill(b, {132}).prefill.spec);
  // The spec's JSON round-trips.
  const KernelSpec s = ops::plan_single_prefill(p, {132}).prefill.spec;
  CHECK(KernelSpec::from_json(s.to_json()) == s);
}

TEST_CASE("single prefill: bad problems name the argument, its value and what is allowed", "[prefill][errors]") {
  auto p = problem(200, 100);
  p.options.causal = true;
  CHECK_NOTHROW(ops::validate(p));  // the first 100 rows see no key: o = 0, lse = -inf, as FlashInfer
  p.options.causal = false;
  CHECK_NOTHROW(ops::validate(p));
  std::string msg;

  p = problem(16, 16, 32, 8, 96);
  msg = error_of([&] { ops::validate(p); }, Status::Unsupported);
  CHECK_THAT(msg, Catch::Contains("head_dim=96") && Catch::Contains("64, 128, 256"));

  p = problem(16, 16);
  p.kv_dtype = DType::E4M3;  // fp8 KV with a 16-bit q is allowed
  CHECK_NOTHROW(ops::validate(p));
  CHECK(ops::plan_single_prefill(p, {132}).prefill.spec.as<PrefillKernel>()->variant.kv_dtype == DType::E4M3);
  p.options.k_scale = 0.f;
  msg = error_of([&] { ops::validate(p); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("k_scale=0"));
  p = problem(16, 16);
  p.q_dtype = p.kv_dtype = DType::F32;
  msg = error_of([&] { ops::validate(p); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("q.dtype=float32") && Catch::Contains("float16, bfloat16"));
  p = problem(16, 16);
  p.kv_dtype = DType::F16;
  msg = error_of([&] { ops::validate(p); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("k.dtype=float16") && Catch::Contains("bfloat16"));

  p = problem(16, 16, 12, 8);
  msg = error_of([&] { ops::validate(p); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("num_qo_heads=12") && Catch::Contains("num_kv_heads=8"));

  p = problem(16, 16);
  p.options.backend = "fa3";
  CHECK_NOTHROW(ops::validate(p));  // a backend the device may lack fails at plan, where the device is known
  ops::DeviceFigures ampere{108, 163 * 1024, "sm_80"};
  msg = error_of([&] { ops::plan_single_prefill(p, ampere); }, Status::Unsupported);
  CHECK_THAT(msg, Catch::Contains("backend='fa3'") && Catch::Contains("sm_80") && Catch::Contains("'auto', 'fa2'"));
  p.kv_dtype = DType::E4M3;
  msg = error_of([&] { ops::plan_single_prefill(p, {132}); }, Status::Unsupported);
  CHECK_THAT(msg, Catch::Contains("backend='fa3'") && Catch::Contains("e4m3"));
  p.kv_dtype = p.q_dtype;
  p.options.backend = "triton";
  msg = error_of([&] { ops::validate(p); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("backend='triton'"));
  p.options.backend = "fa2";
  CHECK_NOTHROW(ops::validate(p));

  p = problem(16, 16);
  p.options.window_left = -5;
  msg = error_of([&] { ops::validate(p); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("window_left=-5"));
  p = problem(16, 16);
  p.options.logits_soft_cap = -1.f;
  msg = error_of([&] { ops::validate(p); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("logits_soft_cap=-1"));
}

TEST_CASE("single prefill: the custom mask must match the plan and hold qo_len * kv_len bits", "[prefill][errors]") {
  auto p = problem(10, 100);
  p.options.custom_mask = true;
  auto msg = error_of([&] { ops::check_custom_mask(p, nullptr); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("mask: null") && Catch::Contains("1000 bits"));
  const uint8_t dummy[4] = {};
  PackedMask short_mask{dummy, 124};
  msg = error_of([&] { ops::check_custom_mask(p, &short_mask); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("bytes=124") && Catch::Contains("need 125 bytes"));
  PackedMask ok{dummy, 125};
  CHECK_NOTHROW(ops::check_custom_mask(p, &ok));
  p.options.custom_mask = false;
  msg = error_of([&] { ops::check_custom_mask(p, &ok); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("custom_mask=false"));
}

TEST_CASE("pack_custom_mask uses FlashInfer's bit order (little-endian within a byte)", "[prefill]") {
  const std::vector<bool> m = {true, false, false, false, false, false, false, true, false, true};
  const auto packed = pack_custom_mask(m);
  REQUIRE(packed.size() == 2);
  CHECK(packed[0] == 0x81);
  CHECK(packed[1] == 0x02);
  const uint8_t bytes[3] = {1, 1, 0};
  CHECK(pack_custom_mask(bytes, 3) == std::vector<uint8_t>{0x03});
}

TEST_CASE("single prefill problems round-trip through JSON, and unknown keys are errors", "[prefill]") {
  auto p = problem(77, 700);
  p.options.causal = true;
  p.options.window_left = 32;
  p.options.logits_soft_cap = 50.f;
  p.options.kv_layout = KVLayout::HND;
  const auto j = ops::to_json(p);
  const auto q = ops::single_prefill_problem_from_json(j);
  CHECK(ops::to_json(q) == j);
  auto bad = j;
  bad["qo_lens"] = 3;
  const auto msg = error_of([&] { ops::single_prefill_problem_from_json(bad); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("problem.qo_lens"));
  // Through the registry, as prewarm and explain reach it.
  const auto& op = ops::find_operator("single_prefill");
  CHECK_FALSE(op.kernels_for(j).empty());
  CHECK(op.explain(j, {132}).at("num_chunks").get<int>() >= 1);
}

TEST_CASE("single prefill plan: the backend follows the device and the K/V dtype", "[prefill][planner]") {
  auto kernel = [](SinglePrefillProblem p, const ops::DeviceFigures& d) {
    return *ops::plan_single_prefill(p, d).prefill.spec.as<PrefillKernel>();
  };
  const ops::DeviceFigures hopper{132}, ampere{108, 163 * 1024, "sm_80"};
  for (int d : {64, 128, 256}) {
    INFO("head_dim " << d);
    auto p = problem(1000, 4096, 32, 8, d);
    p.options.backend = "fa3";  // the Hopper skeleton that is not warp-specialized ("auto" takes fa3_ws: below)
    const PrefillKernel k = kernel(p, hopper);
    CHECK(k.backend == PrefillBackend::Fa3);
    CHECK_FALSE(k.warp_specialized);
    CHECK(k.frags_m == 2);  // two warpgroups
    CHECK(k.threads() == 256);
    CHECK(k.tile_q() == 128);
    // Two CTAs per SM with 64-key tiles where registers allow (not 256-wide heads)
    const int ctas = d <= 128 ? 2 : 1;
    CHECK(ops::prefill_ctas_per_sm(k) == ctas);
    CHECK(k.min_ctas_per_sm == ctas);
    CHECK(k.tile_kv() == 64);
    CHECK(ctas * (k.dynamic_smem_bytes() + 1024) <= 228 * 1024);
    auto heavy = p;  // a variant that would spill under 128 registers: one CTA, 128-key tiles at d <= 128
    heavy.options.pos_encoding_mode = PosEncoding::RopeLlama;
    const PrefillKernel h = kernel(heavy, hopper);
    CHECK(h.min_ctas_per_sm == 1);
    CHECK(h.tile_kv() == (d <= 128 ? 128 : 64));
    CHECK(h.dynamic_smem_bytes() + 1024 <= 228 * 1024);
    heavy.options.pos_encoding_mode = PosEncoding::Alibi;  // a few spill loads in a long loop: still two
    heavy.options.logits_soft_cap = 30.f;
    CHECK(kernel(heavy, hopper).min_ctas_per_sm == ctas);
    heavy.options.causal = true;  // causal with a window spills: one
    heavy.options.window_left = 128;
    CHECK(kernel(heavy, hopper).min_ctas_per_sm == 1);
    CHECK(k.supports_arch("sm_90a"));
    CHECK_FALSE(k.supports_arch("sm_80"));
    CHECK(PrefillKernel::from_json(k.to_json()) == k);
    CHECK(k.name().rfind("prefill_fa3_", 0) == 0);
    p.options.backend = "auto";
    CHECK(kernel(p, ampere).backend == PrefillBackend::Fa2);  // other archs
    p.options.backend = "fa2";
    CHECK(kernel(p, hopper).backend == PrefillBackend::Fa2);  // asked for
    p.options.backend = "auto";
    p.kv_dtype = DType::E4M3;
    CHECK(kernel(p, hopper).backend == PrefillBackend::Fa2);  // fp8 K/V
  }
  // The engine refuses to build the Hopper skeleton for another arch, before any compile
  {
    auto p = problem(1000, 4096);
    p.options.backend = "fa3";
    const KernelSpec fa3 = kernel(p, hopper);
    Config config;
    config.cache.mode = CacheMode::Off;  // never touch the disk
    detail::Engine engine(config);
    const auto msg = error_of([&] { engine.prepare(fa3, "sm_80"); }, Status::Unsupported);
    CHECK_THAT(msg, Catch::Contains("prefill_fa3_") && Catch::Contains("arch='sm_80'") && Catch::Contains("sm_90a"));
  }
  // prewarm's list for "fa3" holds fa3 at one and two warpgroups; it keeps the Hopper kernels for sm_90a only
  auto fa3_problem = problem(1000, 4096);
  fa3_problem.options.backend = "fa3";
  const auto specs = ops::single_prefill_kernels(fa3_problem);
  CHECK(std::count_if(specs.begin(), specs.end(), [](const KernelSpec& s) {
          const auto* k = s.as<PrefillKernel>();
          return k && k->backend == PrefillBackend::Fa3 && !k->warp_specialized;
        }) == 2);
}

// "auto" on sm_90a: the warp-specialized skeleton where it serves the
// variant at head_dim 128 and 256 (every 16-bit variant at 128, and at 256
// without RoPE); fa3 where it does not (RoPE at 256) and at head_dim 64;
// fa2 for head_dim 512, fp8 K/V and other archs. prewarm lists exactly the
// Hopper kernel "auto" plans.
TEST_CASE("single and batch prefill plans: auto takes fa3_ws on sm_90a where it serves the spec",
          "[prefill][planner][fa3_ws]") {
  const ops::DeviceFigures hopper{132}, ampere{108, 163 * 1024, "sm_80"};
  auto kernel = [](const SinglePrefillProblem& p, const ops::DeviceFigures& d) {
    return *ops::plan_single_prefill(p, d).prefill.spec.as<PrefillKernel>();
  };
  auto hopper_kernels = [](const SinglePrefillProblem& p) {
    std::vector<PrefillKernel> out;
    for (const auto& s : ops::single_prefill_kernels(p))
      if (const auto* k = s.as<PrefillKernel>(); k && k->backend == PrefillBackend::Fa3) out.push_back(*k);
    return out;
  };
  for (int d : {64, 128, 256})
    for (PosEncoding pe : {PosEncoding::None, PosEncoding::RopeLlama, PosEncoding::Alibi})
      for (bool causal : {false, true}) {
        auto p = problem(1000, 4096, 32, 8, d);
        p.options.pos_encoding_mode = pe;
        p.options.causal = causal;
        const bool served = d >= 128 && !(pe == PosEncoding::RopeLlama && d > 128);
        INFO("head_dim " << d << " " << to_string(pe) << (causal ? " causal" : ""));
        const PrefillKernel k = kernel(p, hopper);
        CHECK(k.backend == PrefillBackend::Fa3);
        CHECK(k.warp_specialized == served);
        CHECK(k.threads() == (served ? 384 : 256));
        CHECK(k.name().rfind(served ? "prefill_fa3ws_" : "prefill_fa3_", 0) == 0);
        const auto listed = hopper_kernels(p);
        CHECK(std::find(listed.begin(), listed.end(), k) != listed.end());
        for (const auto& l : listed) CHECK(l.warp_specialized == served);  // nothing "auto" never plans
        CHECK(kernel(p, ampere).backend == PrefillBackend::Fa2);
      }
  // Other variants fa3_ws serves: a custom mask, a soft cap, a window, f16.
  auto p = problem(777, 3000, 16, 4, 128);
  p.options.custom_mask = true;
  p.options.logits_soft_cap = 30.f;
  p.options.window_left = 200;
  p.q_dtype = p.kv_dtype = DType::F16;
  CHECK(kernel(p, hopper).warp_specialized);
  // What it does not: fp8 K/V and head_dim 512 take fa2.
  auto fp8 = problem(1000, 4096);
  fp8.kv_dtype = DType::E4M3;
  CHECK(kernel(fp8, hopper).backend == PrefillBackend::Fa2);
  CHECK(kernel(problem(1000, 4096, 8, 8, 512), hopper).backend == PrefillBackend::Fa2);

  // Batch prefill, ragged and paged, and in CUDA-graph mode: the same choice.
  for (KVSource source : {KVSource::Ragged, KVSource::Paged})
    for (int graph_batch : {0, 4})
      for (auto [d, pe] : {std::pair{128, PosEncoding::None}, {64, PosEncoding::RopeLlama},
                           {256, PosEncoding::None}, {256, PosEncoding::RopeLlama}}) {
        ops::BatchPrefillShape s = test::batch_prefill_shape({17, 883}, {300, 4000}, 16, 4, d);
        s.options.pos_encoding_mode = pe;
        s.source = source;
        s.num_page_indices = 1000;
        s.graph_max_batch = graph_batch;
        INFO(to_string(source) << " head_dim " << d << " " << to_string(pe) << " graph " << graph_batch);
        const auto L = ops::plan_batch_prefill(s, hopper);
        const auto* k = L.prefill.spec.as<PrefillKernel>();
        REQUIRE(k);
        CHECK(k->backend == PrefillBackend::Fa3);
        CHECK(k->warp_specialized == (d >= 128 && !(pe == PosEncoding::RopeLlama && d > 128)));
      }
}

TEST_CASE("single prefill plan, fa3: one warpgroup where 128-row tiles leave most SMs idle",
          "[prefill][planner]") {
  const ops::DeviceFigures hopper{132};
  auto single = [&](int64_t n, int heads, int d) {
    auto p = problem(n, n, heads, heads, d);
    p.options.backend = "fa3";  // fa3_ws ("auto") has one CTA shape
    return *ops::plan_single_prefill(p, hopper).prefill.spec.as<PrefillKernel>();
  };
  // 512 tokens: 4 tiles of 128 rows x 16 heads = 64 CTAs <= 132 / 2: one warpgroup, 128 CTAs of 64 rows.
  const PrefillKernel small = single(512, 16, 128);
  CHECK(small.frags_m == 1);
  CHECK(small.tile_q() == 64);
  CHECK(small.threads() == 128);
  CHECK(small.dynamic_smem_bytes() < single(4096, 16, 128).dynamic_smem_bytes());
  CHECK(PrefillKernel::from_json(small.to_json()) == small);
  CHECK(small.name().find("_w1_") != std::string::npos);
  CHECK(single(512, 8, 256).frags_m == 1);   // 32 CTAs
  CHECK(single(1024, 8, 256).frags_m == 1);  // 64
  CHECK(single(512, 32, 64).frags_m == 2);   // 128: already a CTA for almost every SM
  CHECK(single(4096, 16, 128).frags_m == 2);
  CHECK(single(4096, 16, 128).threads() == 256);
}

TEST_CASE("single prefill plan, fa2: the query tile follows the packed query length", "[prefill][planner]") {
  auto tile = [](int64_t qo, int hq, int hk, int d) {
    auto p = problem(qo, 4096, hq, hk, d);
    p.options.backend = "fa2";
    return ops::plan_single_prefill(p, {132}).prefill.spec.as<PrefillKernel>()->tile_q();
  };
  CHECK(tile(16, 32, 8, 128) == 64);    // 64 packed rows: one small tile
  CHECK(tile(1000, 32, 8, 128) == 128);  // long prefill: 128-row tiles
  CHECK(tile(1000, 32, 8, 256) == 64);   // 256-wide heads keep 64 rows (registers)
  CHECK(tile(128, 32, 8, 64) == 128);    // GQA packing counts: 128 tokens x 4 heads
}

TEST_CASE("single prefill plan, fa2: the K/V pipeline keeps two CTAs per SM on sm_90", "[prefill][planner]") {
  auto kernel = [](int d) {
    auto p = problem(1000, 4096, 32, 8, d);
    p.options.backend = "fa2";
    return *ops::plan_single_prefill(p, {132}).prefill.spec.as<PrefillKernel>();
  };
  for (int d : {64, 128, 256}) {
    const PrefillKernel k = kernel(d);
    INFO("head_dim " << d);
    CHECK(2 * (k.dynamic_smem_bytes() + 1024) <= 228 * 1024);
    CHECK(k.tile_kv() == 64);  // 256-wide heads too: one K and one V buffer (stages 1) hold 64 keys
  }
  CHECK(kernel(256).stages == 1);
  CHECK(kernel(64).stages == 3);
  // 64-wide heads cap registers for a third CTA, where its shared memory fits too
  const PrefillKernel d64 = kernel(64);
  CHECK(d64.min_ctas_per_sm == 3);
  CHECK(3 * (d64.dynamic_smem_bytes() + 1024) <= 228 * 1024);
  CHECK(ops::prefill_ctas_per_sm(d64) == 3);
  CHECK(kernel(128).min_ctas_per_sm == 1);
  CHECK(ops::prefill_ctas_per_sm(kernel(128)) == 2);
  // ... but not for the variants that would spill under the cap
  auto custom = problem(1000, 4096, 32, 8, 64);
  custom.options.custom_mask = true;
  CHECK(ops::plan_single_prefill(custom, {132}).prefill.spec.as<PrefillKernel>()->min_ctas_per_sm == 1);
  // The spec round-trips through JSON (the cache key and prewarm manifests), old specs read as 1
  CHECK(PrefillKernel::from_json(d64.to_json()) == d64);
  auto old = d64.to_json();
  old.erase("min_ctas_per_sm");
  CHECK(PrefillKernel::from_json(old).min_ctas_per_sm == 1);
}

TEST_CASE("fa3_ws runs persistent CTAs, at most one per SM, where item costs fall or the runtime asks",
          "[planner][prefill][persistent]") {
  using P = Config::Persistence;
  ops::DeviceFigures hopper{132};
  auto plan = [&](const SinglePrefillProblem& p, P mode) {
    hopper.persistent_prefill = mode;
    return ops::plan_single_prefill(p, hopper);
  };
  auto causal = problem(1000, 1000);  // 32 / 8 heads, d 128, bf16: auto plans fa3_ws
  causal.options.causal = true;
  // Causal: tiles of falling and rising cost; static rounds would unbalance the SMs.
  const auto one_per_item = plan(causal, P::Auto);
  const auto* k0 = one_per_item.prefill.spec.as<PrefillKernel>();
  REQUIRE(k0 != nullptr);
  CHECK(k0->warp_specialized);
  CHECK_FALSE(k0->persistent);
  const uint32_t items = one_per_item.prefill.shape.grid[0];
  CHECK(items == uint32_t(one_per_item.num_q_tiles) * 8);
  CHECK_FALSE(plan(causal, P::Never).prefill.spec.as<PrefillKernel>()->persistent);

  const auto forced = plan(causal, P::Always);
  const auto* k1 = forced.prefill.spec.as<PrefillKernel>();
  REQUIRE(k1 != nullptr);
  CHECK(k1->persistent);
  CHECK(forced.prefill.shape.grid[0] == std::min<uint32_t>(items, 132));
  CHECK(k1->name().rfind("prefill_fa3ws_d128_s2_persistent_", 0) == 0);
  // d 128 causal (128-key tiles): a second Q tile fits, 32 KB more shared memory.
  CHECK(k1->dynamic_smem_bytes() == k0->dynamic_smem_bytes() + 32768);
  CHECK(PrefillKernel::from_json(k1->to_json()) == *k1);
  CHECK_FALSE(PrefillKernel::from_json(k1->to_json()) == *k0);

  // No mask: every tile costs the same, persistent by default at d 64 and 128, not 256 (one Q tile).
  for (int d : {64, 128, 256}) {
    auto full = problem(4096, 4096, 16, 16, d);
    full.options.backend = "fa3_ws";
    INFO("head_dim " << d);
    const auto L = plan(full, P::Auto);
    CHECK(L.prefill.spec.as<PrefillKernel>()->persistent == (d <= 128));
    CHECK(L.prefill.shape.grid[0] == (d <= 128 ? 132u : uint32_t(L.num_q_tiles) * 16));
    CHECK_FALSE(plan(full, P::Never).prefill.spec.as<PrefillKernel>()->persistent);
    // A causal window: persistent where the request is at least four windows long (items then cost
    // alike), as a causal mask otherwise.
    auto window = full;
    window.options.causal = true;
    window.options.window_left = 1023;
    CHECK(plan(window, P::Auto).prefill.spec.as<PrefillKernel>()->persistent == (d <= 128));
    window.options.window_left = 1024;
    CHECK_FALSE(plan(window, P::Auto).prefill.spec.as<PrefillKernel>()->persistent);
    window.options.window_left = 1023;
    window.options.causal = false;  // a window without the causal mask: keys past the query too
    CHECK_FALSE(plan(window, P::Auto).prefill.spec.as<PrefillKernel>()->persistent);
    // prewarm lists the persistent kernel beside the one-CTA-an-item one.
    window.options.causal = true;
    int persistent_listed = 0;
    for (const auto& spec : ops::single_prefill_kernels(window))
      if (const auto* k = spec.as<PrefillKernel>()) persistent_listed += k->persistent ? 1 : 0;
    CHECK(persistent_listed == (d <= 128 ? 1 : 0));
  }

  // fa2 is never persistent, whatever the runtime asks.
  auto fa2 = causal;
  fa2.options.backend = "fa2";
  CHECK_FALSE(plan(fa2, P::Always).prefill.spec.as<PrefillKernel>()->persistent);
  PrefillKernel bad = *k1;
  bad.warp_specialized = false;
  bad.backend = PrefillBackend::Fa2;
  CHECK(error_of([&] { bad.validate(); }, Status::InvalidArgument)
            .find("prefill spec.persistent=true needs warp_specialized=true") != std::string::npos);
}

TEST_CASE("batch prefill plan, fa3_ws: persistent where the work list's costs fall", "[planner][prefill][persistent]") {
  const ops::DeviceFigures hopper{132};
  auto shape = test::batch_prefill_shape({4096, 1000, 300, 4096}, {4096, 1000, 300, 4096}, 16, 16, 128);
  shape.options.causal = false;
  const auto L = ops::plan_batch_prefill(shape, hopper);
  const auto* k = L.prefill.spec.as<PrefillKernel>();
  REQUIRE(k != nullptr);
  CHECK(k->warp_specialized);
  CHECK(k->persistent);
  CHECK(L.prefill.shape.grid[0] == 132u);
  shape.options.causal = true;
  CHECK_FALSE(ops::plan_batch_prefill(shape, hopper).prefill.spec.as<PrefillKernel>()->persistent);
}

TEST_CASE("ATTNJIT_PREFILL_PERSISTENT is auto, 1 or 0, and anything else names the variable",
          "[planner][prefill][persistent][config]") {
  using P = Config::Persistence;
  for (auto [value, mode] : {std::pair<const char*, P>{nullptr, P::Auto}, {"auto", P::Auto}, {"1", P::Always},
                             {"0", P::Never}}) {
    test::ScopedEnv e("ATTNJIT_PREFILL_PERSISTENT", value);
    CHECK(Config::from_env().persistent_prefill == mode);
  }
  for (const char* bad : {"yes", "on", "2", "AUTO", " 1"}) {
    test::ScopedEnv e("ATTNJIT_PREFILL_PERSISTENT", bad);
    const std::string msg = error_of([] { Config::from_env(); }, Status::InvalidArgument);
    CHECK(msg.find(std::string("ATTNJIT_PREFILL_PERSISTENT='") + bad + "' is not allowed; allowed: auto") !=
          std::string::npos);
  }
}

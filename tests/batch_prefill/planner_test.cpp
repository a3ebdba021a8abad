// The batch prefill planner and wrappers' checks on the CPU: the work list
// holds every (request, query tile, KV chunk) exactly once, longest first;
// short appends split the KV; bad index arrays fail naming the argument,
// its value and what is allowed.
#include <catch2/catch.hpp>

#include <set>
#include <tuple>

#include "attnjit/batch_prefill.hpp"
#include "support/error_capture.hpp"
#include "support/prefill_problems.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"

using namespace attnjit;
using attnjit::test::error_of;

namespace {

ops::BatchPrefillShape shape(std::vector<int32_t> qo_lens, std::vector<int32_t> kv_lens, bool causal = true) {
  ops::BatchPrefillShape s = test::batch_prefill_shape(qo_lens, std::move(kv_lens), 32, 8, 128);
  s.options.causal = causal;
  s.source = KVSource::Paged;
  s.num_page_indices = 1000;
  return s;
}

}  // namespace

TEST_CASE("batch prefill plan: every (request, tile, chunk) once, longest first", "[prefill][planner][batch]") {
  for (auto lens : {std::pair<std::vector<int32_t>, std::vector<int32_t>>{{1, 7, 128, 1000, 0}, {4096, 7, 1000, 1000, 50}},
                    {{16, 16, 16}, {16384, 8192, 100}},
                    {{3000}, {3000}}}) {
    const auto s = shape(lens.first, lens.second);
    const auto L = ops::plan_batch_prefill(s, {132});
    const auto* k = L.prefill.spec.as<PrefillKernel>();
    REQUIRE(k);
    CHECK(k->kv_source == KVSource::Paged);
    const int group = 4, tq = k->tile_q();
    std::set<std::tuple<int, int, int, int>> want, got;
    for (size_t b = 0; b < lens.first.size(); ++b) {
      const int tiles = (lens.first[b] * group + tq - 1) / tq;
      for (int t = 0; t < tiles; ++t)
        for (int c = 0; c < L.num_chunks; ++c)
          for (int h = 0; h < 8; ++h) want.insert({int(b), t, c, h});
    }
    REQUIRE(L.work.size() == 4 * size_t(L.num_work));
    const int n = L.num_work;
    for (int i = 0; i < n; ++i)
      CHECK(got.insert({L.work[i], L.work[n + i], L.work[2 * n + i], L.work[3 * n + i]}).second);
    CHECK(got == want);  // every (request, tile, chunk, KV head) once: one CTA each
    CHECK(L.prefill.shape.grid[0] == uint32_t(n));
    CHECK(L.prefill.shape.grid[2] == 1u);
    CHECK(int64_t(L.num_chunks) * L.chunk_size >= *std::max_element(lens.second.begin(), lens.second.end()));
    CHECK(L.chunk_size % k->tile_kv() == 0);
    CHECK(L.merge.has_value() == (L.num_chunks > 1));
    // The uploaded arrays have their regions in the int part.
    for (const char* r : {"work", "qo_indptr", "kv_indptr", "paged_kv_indices", "paged_kv_last_page_len"})
      CHECK(L.workspace.region(r).is_int);
    CHECK(L.workspace.region("work").bytes == L.work.size() * 4);
  }
  // The first item is the longest request's last tile (it sees the most keys).
  const auto L = ops::plan_batch_prefill(shape({10, 500}, {10, 5000}), {132});
  CHECK(L.work[0] == 1);
  // A request's query tiles (which read the same K/V) start together, last tile first.
  const auto append = ops::plan_batch_prefill(shape(std::vector<int32_t>(32, 128), std::vector<int32_t>(32, 8192)), {132});
  const int tiles = (128 * 4 + append.prefill.spec.as<PrefillKernel>()->tile_q() - 1) /
                    append.prefill.spec.as<PrefillKernel>()->tile_q();
  REQUIRE(tiles > 1);
  REQUIRE(append.num_work == 32 * tiles * 8);
  for (int i = 0; i < append.num_work; ++i) {
    // Causal: each tile sees a different number of keys, so KV heads vary fastest.
    CHECK(append.work[i] == i / (tiles * 8));
    CHECK(append.work[append.num_work + i] == tiles - 1 - i / 8 % tiles);
    CHECK(append.work[3 * append.num_work + i] == i % 8);
  }
  // Without a mask a request's tiles cost the same: KV head slowest along
  // them, so one head's tiles (which read the same K/V) start side by side.
  const auto full = ops::plan_batch_prefill(shape({4096, 4096}, {4096, 4096}, false), {132});
  const int full_tiles = 4096 * 4 / full.prefill.spec.as<PrefillKernel>()->tile_q();
  REQUIRE(full.num_chunks == 1);
  REQUIRE(full.num_work == 2 * full_tiles * 8);
  for (int i = 0; i < full.num_work; ++i) {
    CHECK(full.work[i] == i / (full_tiles * 8));
    CHECK(full.work[3 * full.num_work + i] == i / full_tiles % 8);
  }
}

TEST_CASE("batch prefill plan: a few new tokens against long caches split the KV", "[prefill][planner][batch]") {
  const auto append = ops::plan_batch_prefill(shape({16, 16}, {32768, 32768}), {132});
  CHECK(append.num_chunks > 1);
  CHECK(append.num_work * 8 >= 132);
  CHECK(append.workspace.region("partial_o").bytes == size_t(append.num_chunks) * 32 * 32 * 128 * 4);
  const auto big = ops::plan_batch_prefill(shape(std::vector<int32_t>(32, 128), std::vector<int32_t>(32, 8192)), {132});
  CHECK(big.num_chunks == 1);  // 32 x 128 tokens already fill the device
}

TEST_CASE("batch prefill plan, CUDA-graph mode: one launch for every batch up to the maximum", "[prefill][planner][batch][graph]") {
  // What a captured launch bakes in must not depend on the lengths: the
  // kernel, the grid and the workspace's regions; the lengths travel as the
  // running tile counts, padded to max_batch_size + 1. The first plan picks
  // the query tile from its lengths; the wrapper hands it to the later ones.
  std::vector<ops::BatchPrefillLayout> plans;
  std::vector<std::vector<int32_t>> qo_lens = {{1, 7, 128, 1000}, {4}, {3000, 1}, {16, 16, 16, 16}};
  for (const auto& q : qo_lens) {
    auto s = shape(q, std::vector<int32_t>(q.size(), 4096));
    s.options.backend = "fa2";  // its query tile follows the lengths (fa3's is always 128 rows)
    s.graph_max_batch = 4;
    if (!plans.empty()) s.graph_frags_m = plans[0].prefill.spec.as<PrefillKernel>()->frags_m;
    plans.push_back(ops::plan_batch_prefill(s, {132}));
    const auto& L = plans.back();
    const auto* k = L.prefill.spec.as<PrefillKernel>();
    REQUIRE(k);
    const int tq = k->tile_q();
    REQUIRE(L.tile_indptr.size() == 5);
    CHECK(L.tile_indptr[0] == 0);
    for (size_t b = 0; b < 4; ++b) {
      const int tiles = b < q.size() ? (q[b] * 4 + tq - 1) / tq : 0;  // group 4
      CHECK(L.tile_indptr[b + 1] - L.tile_indptr[b] == tiles);
    }
    CHECK(L.num_work == L.tile_indptr.back());
    CHECK(L.num_chunks == 1);  // no split: partial states would need a bound on the rows
    CHECK_FALSE(L.merge.has_value());
    CHECK(L.chunk_size >= 4096);
    CHECK(L.work.empty());
  }
  for (const auto& L : plans) {
    CHECK(L.prefill.spec.name() == plans[0].prefill.spec.name());
    CHECK(L.prefill.shape.grid[0] == plans[0].prefill.shape.grid[0]);
    CHECK(L.prefill.shape.grid[0] >= 132u);  // at least one CTA per SM, persistent
    CHECK(L.prefill.shape.grid[0] % 132 == 0);
    CHECK(L.workspace.region("work_counter").bytes == 8);
    CHECK(L.workspace.to_json() == plans[0].workspace.to_json());
  }
  CHECK(plans[0].prefill.spec.as<PrefillKernel>()->frags_m == 2);  // 1000 tokens x group 4
  auto first_short = shape({4}, {4096});
  first_short.options.backend = "fa2";
  first_short.graph_max_batch = 4;
  CHECK(ops::plan_batch_prefill(first_short, {132}).prefill.spec.as<PrefillKernel>()->frags_m == 1);
  auto s = shape({1, 1, 1, 1, 1}, {8, 8, 8, 8, 8});
  s.graph_max_batch = 4;
  CHECK_THAT(error_of([&] { ops::plan_batch_prefill(s, {132}); }, Status::InvalidArgument),
             Catch::Contains("batch_size=5") && Catch::Contains("max_batch_size=4"));
}

TEST_CASE("batch prefill: bad index arrays name the argument, value and what is allowed", "[prefill][errors][batch]") {
  auto s = shape({4, 4}, {8, 8});
  s.qo_indptr = {1, 5, 9};
  auto msg = error_of([&] { ops::validate_batch_prefill(s); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("qo_indptr[0]=1") && Catch::Contains("must be 0"));
  s.qo_indptr = {0, 5, 3};
  msg = error_of([&] { ops::validate_batch_prefill(s); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("qo_indptr[2]=3 < qo_indptr[1]=5") && Catch::Contains("non-decreasing"));
  s = shape({4, 20}, {8, 10});
  CHECK_NOTHROW(ops::validate_batch_prefill(s));  // causal, qo_len > kv_len: rows that see no key give 0
  s.options.causal = false;
  CHECK_NOTHROW(ops::validate_batch_prefill(s));
  s.kv_lens = {8};
  msg = error_of([&] { ops::validate_batch_prefill(s); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("batch_size = 2"));
  CHECK_THAT(error_of([&] { ops::check_indptr({0, 3}, "kv_indptr", 2); }, Status::InvalidArgument),
             Catch::Contains("kv_indptr: 2 entries") && Catch::Contains("batch_size + 1 = 3"));
}

TEST_CASE("batch prefill wrappers check their arrays before touching a device", "[prefill][errors][batch]") {
  Runtime rt;
  alignas(256) static char ws[256];
  BatchPrefillWithPagedKVCacheWrapper paged(rt, ws, sizeof ws);
  BatchPrefillPlanOptions o;
  auto msg = error_of([&] { paged.plan({0, 4, 8}, {0, 1, 2}, {0, 1}, {1, 17}, 8, 2, 128, 16, o, nullptr); },
                      Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("paged_kv_last_page_len[1]=17") && Catch::Contains("[1, page_size=16]"));
  msg = error_of([&] { paged.plan({0, 4, 8}, {0, 1, 3}, {0, 1}, {1, 1}, 8, 2, 128, 16, o, nullptr); },
                 Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("paged_kv_indices: 2 entries") && Catch::Contains("paged_kv_indptr[-1] = 3"));
  msg = error_of([&] { paged.plan({0, 4, 8}, {0, 1, 2}, {0, -1}, {1, 1}, 8, 2, 128, 16, o, nullptr); },
                 Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("paged_kv_indices[1]=-1"));
  msg = error_of([&] { paged.plan({0, 4, 8}, {0, 1, 2}, {0, 1}, {1, 1}, 8, 2, 128, 0, o, nullptr); },
                 Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("page_size=0"));
  o.custom_mask.assign(10, true);  // needs 4*16 + 4*16 = 128 entries
  msg = error_of([&] { paged.plan({0, 4, 8}, {0, 1, 2}, {0, 1}, {16, 16}, 8, 2, 128, 16, o, nullptr); },
                 Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("custom_mask: 10 entries") && Catch::Contains("= 128"));
  CHECK_THROWS_WITH(paged.run({}, {}, {}, {}, nullptr, nullptr), Catch::Contains("plan() first"));

  BatchPrefillWithRaggedKVCacheWrapper ragged(rt, ws, sizeof ws);
  BatchPrefillPlanOptions r;
  msg = error_of([&] { ragged.plan({0, 4, 8}, {0, 9, 4}, 8, 2, 128, r, nullptr); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("kv_indptr[2]=4 < kv_indptr[1]=9"));
  msg = error_of([&] { BatchPrefillWithRaggedKVCacheWrapper(rt, ws, sizeof ws, KVLayout::NHD, "fa4"); },
                 Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("backend='fa4'") && Catch::Contains("'fa3'"));
  CHECK_NOTHROW(BatchPrefillWithRaggedKVCacheWrapper(rt, ws, sizeof ws, KVLayout::NHD, "fa3"));  // plan() checks the device
}

TEST_CASE("batch prefill wrappers in CUDA-graph mode check their fixed buffers and what a plan may use",
          "[prefill][errors][batch][graph]") {
  Runtime rt;
  alignas(256) static char ws[256];
  // Made-up device addresses: nothing here reaches a device.
  auto* fake = reinterpret_cast<int32_t*>(uintptr_t{0x7f0000000000});
  BatchPrefillCudaGraphBuffers g;
  g.max_batch_size = 2;
  g.qo_indptr = fake;
  auto msg = error_of([&] { BatchPrefillWithRaggedKVCacheWrapper(rt, ws, sizeof ws, g); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("kv_indptr_buf") && Catch::Contains("null"));
  g.kv_indptr = fake + 64;
  g.max_batch_size = 0;
  msg = error_of([&] { BatchPrefillWithRaggedKVCacheWrapper(rt, ws, sizeof ws, g); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("max_batch_size=0"));
  g.max_batch_size = 2;
  g.custom_mask = reinterpret_cast<uint8_t*>(fake + 128);
  msg = error_of([&] { BatchPrefillWithRaggedKVCacheWrapper(rt, ws, sizeof ws, g); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("qk_indptr_buf") && Catch::Contains("both"));
  g.custom_mask = nullptr;
  msg = error_of([&] { BatchPrefillWithPagedKVCacheWrapper(rt, ws, sizeof ws, g); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("paged_kv_indices_buf=null"));

  // Plans past the buffers fail before anything is uploaded.
  BatchPrefillWithRaggedKVCacheWrapper ragged(rt, ws, sizeof ws, g);
  BatchPrefillPlanOptions o;
  msg = error_of([&] { ragged.plan({0, 1, 2, 3}, {0, 5, 10, 15}, 8, 2, 128, o, nullptr); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("batch_size=3") && Catch::Contains("max_batch_size=2"));
  o.custom_mask.assign(10, true);
  msg = error_of([&] { ragged.plan({0, 1, 2}, {0, 5, 10}, 8, 2, 128, o, nullptr); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("custom_mask") && Catch::Contains("no custom_mask_buf"));
  g.paged_kv_indices = fake + 256;
  g.max_num_pages = 3;
  g.paged_kv_last_page_len = fake + 512;
  BatchPrefillWithPagedKVCacheWrapper paged(rt, ws, sizeof ws, g);
  BatchPrefillPlanOptions po;
  msg = error_of([&] { paged.plan({0, 4, 8}, {0, 2, 4}, {0, 1, 2, 3}, {16, 16}, 8, 2, 128, 16, po, nullptr); },
                 Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("paged_kv_indices: 4 entries") && Catch::Contains("at most 3"));
}

#include "codegen.hpp"
#include "cuda/nvrtc.hpp"

TEST_CASE("NVRTC compiles the prefill skeleton with the ragged and paged KV sources for sm_80 and sm_90a",
          "[nvrtc][variants][batch]") {
  // The variants the batch wrappers add to single prefill's grid: the KV source
  // (the rest of the variant axes are the same template code, covered there).
  std::vector<PrefillKernel> specs(2);
  specs[0].kv_source = KVSource::Ragged;
  specs[0].variant.mask = MaskMode::Causal;
  specs[0].variant.q_dtype = specs[0].variant.kv_dtype = specs[0].variant.o_dtype = DType::BF16;
  specs[1].kv_source = KVSource::Paged;
  specs[1].variant.mask = MaskMode::Custom;
  specs[1].variant.pos_encoding = PosEncoding::RopeLlama;
  specs[1].window = true;
  specs[1].head_dim = 64;
  specs[1].frags_m = 2;
  for (int i = 0; i < 2; ++i) {  // the same two on the Hopper skeleton
    specs.push_back(specs[i]);
    specs.back().backend = PrefillBackend::Fa3;
    specs.back().frags_m = 1;
  }
  for (const auto& s : specs)
    for (const char* arch : {"sm_80", "sm_90a"}) {
      if (!s.supports_arch(arch)) continue;
      INFO(s.name() << " " << arch);
      const TranslationUnit tu = generate(KernelSpec(s));
      cuda::CompileRequest req{tu.source, tu.name, tu.headers, {"-std=c++17"}, arch};
      const auto res = cuda::compile("", req);
      CHECK(res.cubin.size() > 4);
    }
}

TEST_CASE("batch prefill plan, fa3: one warpgroup where the batch's 128-row tiles leave most SMs idle",
          "[prefill][planner][batch]") {
  // Every request's tiles count: one request of 128 tokens (group 4: 512 packed rows) is 4 tiles x 8 KV
  // heads = 32 CTAs of 128 rows; sixteen of them, 512.
  auto fa3 = [](ops::BatchPrefillShape s) {
    s.options.backend = "fa3";  // fa3_ws ("auto") has one CTA shape
    return ops::plan_batch_prefill(s, {132});
  };
  const auto few = fa3(shape({128}, {512}));
  const auto many = fa3(shape(std::vector<int32_t>(16, 128), std::vector<int32_t>(16, 512)));
  CHECK(few.prefill.spec.as<PrefillKernel>()->frags_m == 1);
  CHECK(few.prefill.shape.threads == 128);
  CHECK(many.prefill.spec.as<PrefillKernel>()->frags_m == 2);
  CHECK(many.prefill.shape.threads == 256);
}

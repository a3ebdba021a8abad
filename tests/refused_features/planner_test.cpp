// What attnjit used to refuse where FlashInfer 0.7.2 computes (issue 29),
// without a GPU: requests with no KV in the batch-decode partition and the
// wrappers' checks, causal prefill with more queries than keys, head_dim 512
// decode and several query tokens at head_dim 256 / 512 in the decode
// kernel choice, the draft-tree mask's problem and spec, and every new
// decode variant compiling with NVRTC for sm_80 and sm_90a. The GPU side:
// tests/refused_features/gpu_test.cpp ([gpu][refused]).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "attnjit/error.hpp"
#include "ops/batch_decode/batch_decode_planner.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/decode_choice.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_decode/single_decode_problem.hpp"
#include "ops/single_prefill/single_prefill_problem.hpp"
#include "spec/decode_kernel.hpp"
#include "spec/merge_kernel.hpp"
#include "support/nvrtc_compiles.hpp"
#include "support/prefill_problems.hpp"

using namespace attnjit;

namespace {

BatchDecodeProblem decode_problem(int batch, int hq, int hkv, int d) {
  BatchDecodeProblem p;
  p.batch_size = batch;
  p.num_qo_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = d;
  p.page_size = 16;
  p.q_dtype = p.kv_dtype = p.o_dtype = DType::BF16;
  return p;
}

ops::DecodeShape decode_shape(int hq, int hkv, int d, int q_len = 1) {
  ops::DecodeShape s;
  s.num_qo_heads = hq;
  s.num_kv_heads = hkv;
  s.head_dim = d;
  s.q_dtype = s.kv_dtype = s.o_dtype = DType::BF16;
  s.q_len = q_len;
  return s;
}

}  // namespace

TEST_CASE("batch decode partitions requests with no KV into one empty item each", "[refused][batch_decode]") {
  for (int d : {128, 512}) {
    BatchDecodeProblem p = decode_problem(6, 8, 2, d);
    const auto L = ops::plan_batch_decode(p, ops::DeviceFigures{});
    const std::vector<int32_t> lens = {0, 300, 0, 5000, 1, 0};
    const auto part = ops::partition_batch_decode(p, L, lens.data(), static_cast<int>(lens.size()));
    INFO("head_dim " << d << " items " << part.num_items);
    REQUIRE(part.num_items <= L.max_items);
    std::map<int, std::vector<kernels::DecodeWorkItem>> by_request;
    for (int i = 0; i < part.num_items; ++i) by_request[part.items[i].request].push_back(part.items[i]);
    REQUIRE(by_request.size() == lens.size());  // every request is written, the empty ones too
    for (int b = 0; b < 6; ++b) {
      const auto& items = by_request[b];
      if (lens[b] == 0) {
        REQUIRE(items.size() == 1);
        CHECK(items[0].begin == 0);
        CHECK(items[0].end == 0);
        CHECK(items[0].slot == -1);  // written whole: o = 0, lse = -inf
        CHECK(part.merge_indptr[b + 1] == part.merge_indptr[b]);
      } else {
        int covered = 0;
        for (const auto& w : items) covered += w.end - w.begin;
        CHECK(covered == lens[b]);
      }
    }
    // All empty: still one CTA per request.
    const std::vector<int32_t> none(6, 0);
    const auto empty = ops::partition_batch_decode(p, L, none.data(), 6);
    CHECK(empty.num_items == 6);
    CHECK(empty.num_slots == 0);
    const std::vector<int32_t> negative = {1, -1, 1, 1, 1, 1};
    CHECK_THROWS_WITH(ops::partition_batch_decode(p, L, negative.data(), 6), Catch::Contains("kv_lens[1]=-1"));
  }
  // Many empty requests beside a batch that fills the GPU twice over: the tail
  // cut keeps each empty item (cutting it into pieces would drop it).
  BatchDecodeProblem p = decode_problem(100, 32, 8, 128);
  p.options.use_tensor_cores = true;
  const auto L = ops::plan_batch_decode(p, ops::DeviceFigures{});
  std::vector<int32_t> lens(100, 2000);
  for (int b = 60; b < 100; b += 3) lens[b] = 0;
  const auto part = ops::partition_batch_decode(p, L, lens.data(), 100);
  std::vector<int> items(100, 0);
  for (int i = 0; i < part.num_items; ++i) ++items[part.items[i].request];
  for (int b = 0; b < 100; ++b) CHECK(items[b] >= 1);
}

TEST_CASE("batch decode JSON problems take lengths of 0", "[refused][batch_decode]") {
  const auto j = nlohmann::json::parse(
      R"({"op":"batch_decode","batch_size":3,"num_qo_heads":4,"num_kv_heads":4,"head_dim":128,"kv_lens":[0,7,0]})");
  const BatchDecodeProblem p = ops::batch_decode_problem_from_json(j);
  CHECK(ops::kv_lens_from_json(j, p) == std::vector<int32_t>{0, 7, 0});
  auto bad = j;
  bad["kv_lens"] = {0, -1, 0};
  CHECK_THROWS_WITH(ops::kv_lens_from_json(bad, p), Catch::Contains("[0, "));
}

TEST_CASE("causal prefill with more queries than keys is planned", "[refused][prefill]") {
  SinglePrefillProblem p = test::single_prefill_problem(300, 77, 4, 2, 128);
  p.options.causal = true;
  CHECK_NOTHROW(ops::validate(p));
  p.kv_len = 0;
  CHECK_THROWS_WITH(ops::validate(p), Catch::Contains("kv_len=0"));

  ops::BatchPrefillShape s = test::batch_prefill_shape({50, 1, 249}, {10, 0, 249}, 8, 2, 128, DType::F16);
  const auto L = ops::plan_batch_prefill(s, ops::DeviceFigures{});
  // Every request's query tiles are planned (rows that see no key are written 0, lse -inf).
  std::map<int, int> tiles;
  for (int i = 0; i < L.num_work; ++i) ++tiles[L.work[i]];
  CHECK(tiles.size() == 3);
  s.kv_lens = {10, -1, 249};
  CHECK_THROWS_WITH(ops::validate_batch_prefill(s), Catch::Contains("kv_len of request 1=-1"));
}

TEST_CASE("head_dim 512 decode runs on CUDA cores within shared memory", "[refused][decode_choice]") {
  for (int group : {1, 4, 5, 8})
    for (int q_len : {1, 3}) {
      for (bool tc : {false, true}) {
        auto s = decode_shape(2 * group, 2, 512, q_len);
        s.use_tensor_cores = tc;
        s.smem_per_block = 99 * 1024;  // the smallest opt-in of the GPUs we target
        const DecodeKernel k = ops::choose_decode_kernel(s, KVSourceKind::Paged);
        INFO(k.name());
        CHECK_FALSE(k.tensor_cores);
        CHECK(k.head_dim == 512);
        CHECK(k.heads_per_cta * k.tokens_per_cta <= 4);
        CHECK(group % k.heads_per_cta == 0);
        CHECK(k.dynamic_smem_bytes() <= s.smem_per_block);
        CHECK(k.variant.mask == (q_len > 1 ? MaskMode::Causal : MaskMode::None));
        CHECK_NOTHROW(k.validate());
        CHECK(ops::decode_tile(k).rows_per_iter >= 4);
        CHECK(ops::decode_query_blocks(k, group, q_len) * k.heads_per_cta * k.tokens_per_cta >= group * q_len);
      }
    }
  // The problems accept it; other widths are still refused by name.
  BatchDecodeProblem p = decode_problem(4, 8, 2, 512);
  CHECK_NOTHROW(ops::plan_batch_decode(p, ops::DeviceFigures{}));
  p.head_dim = 384;
  CHECK_THROWS_WITH(ops::validate(p), Catch::Contains("head_dim=384"));
  SingleDecodeProblem sp;
  sp.num_qo_heads = 8;
  sp.num_kv_heads = 8;
  sp.head_dim = 512;
  sp.kv_len = 1000;
  sp.q_dtype = sp.kv_dtype = DType::F16;
  CHECK_NOTHROW(ops::validate(sp));
}

TEST_CASE("several query tokens at head_dim 256 take CUDA cores, tokens x heads a CTA", "[refused][decode_choice]") {
  for (int group : {1, 4, 5, 7, 8})
    for (int q_len : {2, 3, 4, 7, 16}) {
      const DecodeKernel k = ops::choose_decode_kernel(decode_shape(group, 1, 256, q_len), KVSourceKind::BlockTable);
      INFO(k.name() << " group " << group << " q_len " << q_len);
      CHECK_FALSE(k.tensor_cores);
      CHECK(k.variant.mask == MaskMode::Causal);
      CHECK(k.heads_per_cta * k.tokens_per_cta <= 8);
      CHECK(k.template_name() == std::string("single_decode_rows.cu.in"));
      CHECK_NOTHROW(k.validate());
      const int blocks = ops::decode_query_blocks(k, group, q_len);
      CHECK(blocks * k.heads_per_cta * k.tokens_per_cta >= group * q_len);  // every row has a CTA
    }
  BatchDecodeProblem p = decode_problem(3, 8, 2, 256);
  p.q_len_per_req = 4;
  CHECK_NOTHROW(ops::plan_batch_decode(p, ops::DeviceFigures{}));
  p.q_len_per_req = 1;
  p.max_q_len = 9;
  CHECK_NOTHROW(ops::plan_batch_decode(p, ops::DeviceFigures{}));
  // One-token CUDA-core specs keep the template (and translation unit) they had.
  CHECK(ops::choose_decode_kernel(decode_shape(2, 1, 256), KVSourceKind::Paged).template_name() ==
        std::string("single_decode.cu.in"));
}

TEST_CASE("the draft-tree mask is a decode variant of several tokens", "[refused][decode_choice]") {
  auto s = decode_shape(8, 2, 128, 3);
  s.draft_mask = true;
  const DecodeKernel tc = ops::choose_decode_kernel(s, KVSourceKind::BlockTable);
  CHECK(tc.tensor_cores);
  CHECK(tc.variant.mask == MaskMode::Draft);
  CHECK(tc.name().find("_draft") != std::string::npos);
  s.head_dim = 256;
  const DecodeKernel cc = ops::choose_decode_kernel(s, KVSourceKind::BlockTable);
  CHECK_FALSE(cc.tensor_cores);
  CHECK(cc.variant.mask == MaskMode::Draft);
  // A spec round-trips through JSON, and the mask is refused where it means nothing.
  CHECK(DecodeKernel::from_json(cc.to_json()) == cc);
  DecodeKernel bad = cc;
  bad.tokens_per_cta = 2;
  bad.variant.mask = MaskMode::None;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("tokens_per_cta=2 needs mask=causal or draft"));
  bad = cc;
  bad.heads_per_cta = 4;
  bad.tokens_per_cta = 3;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("= 12 query rows"));

  BatchDecodeProblem p = decode_problem(2, 8, 2, 128);
  p.draft_mask = true;
  CHECK_THROWS_WITH(ops::validate(p), Catch::Contains("draft_mask=true is not allowed with 1 query token"));
  p.q_len_per_req = 40;
  CHECK_NOTHROW(ops::validate(p));
  const nlohmann::json j = ops::to_json(p);
  CHECK(j.at("draft_mask") == true);
  CHECK(ops::batch_decode_problem_from_json(j).draft_mask);
  const uint32_t word = 1;
  CHECK_THROWS_WITH(ops::check_draft_mask(p, nullptr, 2), Catch::Contains("draft_mask is null"));
  CHECK_THROWS_WITH(ops::check_draft_mask(p, &word, 1), Catch::Contains("allowed: >= 2"));
  CHECK_NOTHROW(ops::check_draft_mask(p, &word, 2));
  p.draft_mask = false;
  CHECK_THROWS_WITH(ops::check_draft_mask(p, &word, 2), Catch::Contains("made without draft_mask"));
  CHECK_NOTHROW(ops::check_draft_mask(p, nullptr, 0));
}

TEST_CASE("the new decode variants compile with NVRTC", "[refused][nvrtc]") {
  std::vector<KernelSpec> specs;
  {
    auto s = decode_shape(8, 2, 512);
    s.pos_encoding = PosEncoding::RopeLlama;
    specs.emplace_back(ops::choose_decode_kernel(s, KVSourceKind::Contiguous));
    s = decode_shape(4, 4, 512);
    s.kv_dtype = DType::E4M3;
    s.soft_cap = true;
    specs.emplace_back(ops::choose_decode_kernel(s, KVSourceKind::Paged));
  }
  for (bool draft : {false, true}) {
    auto s = decode_shape(16, 2, 256, 3);
    s.draft_mask = draft;
    s.pos_encoding = draft ? PosEncoding::None : PosEncoding::Alibi;
    specs.emplace_back(ops::choose_decode_kernel(s, KVSourceKind::BlockTable));
    s.head_dim = 128;
    specs.emplace_back(ops::choose_decode_kernel(s, KVSourceKind::BlockTable));
    s.head_dim = 512;
    specs.emplace_back(ops::choose_decode_kernel(s, KVSourceKind::Paged));
  }
  MergeKernel m;
  m.head_dim = 512;
  m.o_dtype = DType::BF16;
  specs.emplace_back(m);
  for (const auto& k : specs) test::check_compiles(k);
}

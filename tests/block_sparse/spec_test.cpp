// Block sparsity of a user mask_mod (issue 31 item 2) without a GPU: the
// variant's flags in its JSON and checks, the classification kernel's spec,
// what a single prefill plan launches and reserves for it, the refusals of
// the operators without a block mask, and NVRTC compiling the classification
// kernel and the block-sparse fa2 / fa3 skeletons.
#include <catch2/catch.hpp>

#include <memory>

#include "attnjit/batch_decode.hpp"
#include "attnjit/error.hpp"
#include "attnjit/prefill.hpp"
#include "attnjit/single_decode.hpp"
#include "attnjit/variant.hpp"
#include "block_mask_params.h"
#include "codegen.hpp"
#include "cuda/nvrtc.hpp"
#include "engine.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "spec/kernel_spec.hpp"
#include "spec/user_variant.hpp"
#include "support/cache_support.hpp"
#include "support/error_capture.hpp"
#include "support/prefill_problems.hpp"
#include "support/temp_cache_engine.hpp"

namespace attnjit::test {

namespace {

VariantSource docs(bool block_sparse = true, bool heads_vary = true) {
  VariantSource s;
  s.mask_mod = "return p.doc_at(q) == p.doc_at(kv);";
  s.params = {{"doc", VariantParamType::I32, 1}};
  s.block_sparse = block_sparse;
  s.heads_vary = heads_vary;
  return s;
}

SinglePrefillProblem problem(const VariantSource& s, const std::string& backend = "auto") {
  SinglePrefillProblem p = single_prefill_problem(1000, 1000, 32, 8, 128);
  p.options.backend = backend;
  p.options.variant = std::make_shared<const Variant>(s);
  return p;
}

PrefillKernel prefill_with(const VariantSource& u, int head_dim = 64) {
  PrefillKernel k;
  k.head_dim = head_dim;
  k.variant.q_dtype = k.variant.kv_dtype = k.variant.o_dtype = DType::BF16;
  k.variant.mask = MaskMode::Custom;
  k.variant.user = std::make_shared<const VariantSource>(u);
  return k;
}

}  // namespace

TEST_CASE("block_sparse and heads_vary: in the source's JSON only when set, checked", "[block_sparse]") {
  const nlohmann::json off = variant_source_json(docs(false));
  CHECK_FALSE(off.contains("block_sparse"));
  CHECK_FALSE(off.contains("heads_vary"));
  const nlohmann::json on = variant_source_json(docs(true, false));
  CHECK(on.at("block_sparse") == true);
  CHECK(on.at("heads_vary") == false);
  CHECK(variant_source_from_json(on, "v") == docs(true, false));
  CHECK_FALSE(variant_source_from_json(on, "v") == docs(true, true));
  CHECK(variant_source_digest(docs(true)) != variant_source_digest(docs(false)));

  VariantSource no_mask;
  no_mask.score_mod = "return s;";
  no_mask.block_sparse = true;
  CHECK_THAT(error_of([&] { Variant v(no_mask); }, Status::InvalidArgument),
             Catch::Contains("block_sparse=true needs a mask_mod"));
  CHECK_THAT(error_of([&] { Variant v(docs(false, false)); }, Status::InvalidArgument),
             Catch::Contains("heads_vary=false"));
  nlohmann::json bad = on;
  bad["block_sparse"] = 1;
  CHECK_THAT(error_of([&] { variant_source_from_json(bad, "spec.user"); }, Status::InvalidArgument),
             Catch::Contains("spec.user.block_sparse=1"));
}

TEST_CASE("the block_mask kernel family: JSON round trip, name, refusals", "[block_sparse]") {
  const KernelSpec spec = BlockMaskKernel{std::make_shared<const VariantSource>(docs())};
  CHECK(spec.family_name() == std::string("block_mask"));
  CHECK(spec.name() == "block_mask_user" + variant_source_digest(docs()));
  CHECK(spec.threads() == kernels::kBlockMaskThreads);
  CHECK(KernelSpec::from_json(spec.to_json()) == spec);
  CHECK_THAT(error_of([] { KernelSpec::from_json({{"family", "block_mask"}}); }, Status::InvalidArgument),
             Catch::Contains("block_mask spec.user is missing"));
  nlohmann::json plain = spec.to_json();
  plain["user"] = variant_source_json(docs(false));
  CHECK_THAT(error_of([&] { KernelSpec::from_json(plain); }, Status::InvalidArgument),
             Catch::Contains("block_sparse=true"));
  // The generated code switches the skeleton's KV walk on only for a block-sparse variant.
  const TranslationUnit tu = generate(prefill_with(docs()));
  CHECK_THAT(tu.source, Catch::Contains("#define ATTNJIT_USER_BLOCK_SPARSE 1"));
  CHECK_THAT(generate(prefill_with(docs(false))).source, !Catch::Contains("ATTNJIT_USER_BLOCK_SPARSE"));
  CHECK_THAT(generate(spec).source, Catch::Contains("attnjit_block_mask"));
}

TEST_CASE("single prefill plans the classification first, a workspace region, slots by heads_vary",
          "[block_sparse][planner]") {
  for (const std::string backend : {"fa2", "fa3", "fa3_ws", "auto"}) {
    INFO(backend);
    const auto L = ops::plan_single_prefill(problem(docs(), backend), {});
    REQUIRE(L.block_mask);
    const auto& k = *L.prefill.spec.as<PrefillKernel>();
    CHECK(k.warp_specialized == (backend == "fa3_ws" || backend == "auto"));  // auto at head_dim 128: fa3_ws
    CHECK(k.variant.user->block_sparse);
    CHECK(L.block_mask->spec.as<BlockMaskKernel>()->user == k.variant.user);
    CHECK(L.block_mask->shape.grid[0] == uint32_t(L.num_q_tiles));
    CHECK(L.block_mask->shape.grid[1] == 8u);  // one slot per KV head
    CHECK(L.block_mask_slots == 8);
    CHECK(L.block_mask_stride == (1000 + k.tile_kv() - 1) / k.tile_kv());
    REQUIRE(L.workspace.has("block_mask"));
    CHECK(L.workspace.region("block_mask").bytes ==
          size_t(kernels::block_mask_entries(L.num_q_tiles, 8, L.block_mask_stride)) * 4);
    const auto json = L.to_json();
    CHECK(json.at("kernels").at(0).at("role") == "block_mask");
    // A block mask's tiles cost what it leaves: KV heads fastest, the last query tiles first.
    CHECK_FALSE(L.tiles_fastest);
  }
  // The same mask_mod without block sparsity visits every tile: tiles fastest.
  CHECK(ops::plan_single_prefill(problem(docs(false)), {}).tiles_fastest);
  const auto shared = ops::plan_single_prefill(problem(docs(true, false)), {});
  CHECK(shared.block_mask_slots == 1);
  CHECK(shared.block_mask->shape.grid[1] == 1u);
  // Without block_sparse: no classification, no region.
  const auto plain = ops::plan_single_prefill(problem(docs(false)), {});
  CHECK_FALSE(plain.block_mask);
  CHECK_FALSE(plain.workspace.has("block_mask"));
  // prewarm's list carries the classification kernel.
  bool listed = false;
  for (const KernelSpec& s : ops::single_prefill_kernels(problem(docs()))) listed = listed || s.as<BlockMaskKernel>();
  CHECK(listed);
}

TEST_CASE("operators without a block mask refuse a block-sparse variant by name", "[block_sparse][planner]") {
  const auto v = std::make_shared<const Variant>(docs());
  SingleDecodeProblem d;
  d.kv_len = 100;
  d.num_qo_heads = d.num_kv_heads = 8;
  d.head_dim = 128;
  d.q_dtype = d.kv_dtype = DType::F16;
  d.options.variant = v;
  CHECK_THAT(error_of([&] { ops::plan_single_decode(d, {}); }, Status::Unsupported),
             Catch::Contains("block_sparse=true") && Catch::Contains("decode"));
}

TEST_CASE("NVRTC compiles the classification kernel and the block-sparse skeletons", "[block_sparse][nvrtc]") {
  ATTNJIT_REQUIRE_NVRTC();
  TempCacheEngine temp;
  detail::Engine& engine = temp.engine;
  const auto source = std::make_shared<const VariantSource>(docs());
  SECTION("classification") {
    CHECK_NOTHROW(engine.prepare(BlockMaskKernel{source}, "sm_80"));
    VariantSource broken = docs();
    broken.mask_mod = "return p.doc_at(q) == ;";
    const std::string msg = error_of(
        [&] { engine.prepare(BlockMaskKernel{std::make_shared<const VariantSource>(broken)}, "sm_80"); },
        Status::InvalidArgument);
    CHECK_THAT(msg, Catch::Contains("mask_mod line 1"));
  }
  SECTION("fa2: d64, d128 with two fragments and three stages, d256 one stage, paged with a window") {
    CHECK_NOTHROW(engine.prepare(prefill_with(docs(), 64), "sm_80"));
    PrefillKernel k = prefill_with(docs(), 128);
    k.frags_m = 2;
    k.stages = 3;
    CHECK_NOTHROW(engine.prepare(k, "sm_90a"));
    PrefillKernel wide = prefill_with(docs(true, false), 256);
    wide.stages = 1;
    CHECK_NOTHROW(engine.prepare(wide, "sm_80"));
    PrefillKernel paged = prefill_with(docs(), 128);
    paged.kv_source = KVSource::Paged;
    paged.window = true;
    CHECK_NOTHROW(engine.prepare(paged, "sm_80"));
  }
  SECTION("batch: fa2 and fa3 over ragged K/V (the walk numbers rows by request)") {
    PrefillKernel k = prefill_with(docs(true, false), 128);
    k.kv_source = KVSource::Ragged;
    CHECK_NOTHROW(engine.prepare(k, "sm_80"));
    k.backend = PrefillBackend::Fa3;
    k.frags_m = 2;
    CHECK_NOTHROW(engine.prepare(k, "sm_90a"));
  }
  SECTION("fa3: one and two warpgroups") {
    for (int wg : {1, 2}) {
      PrefillKernel k = prefill_with(docs(), 128);
      k.backend = PrefillBackend::Fa3;
      k.frags_m = wg;
      CHECK_NOTHROW(engine.prepare(k, "sm_90a"));
    }
  }
}

}  // namespace attnjit::test

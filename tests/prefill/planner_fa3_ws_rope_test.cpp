// RoPE on the warp-specialized Hopper prefill (backend "fa3_ws") without a
// GPU: planned at head_dim 64 and 128 (single and batch, every KV source),
// its kernel spec names RoPE and warp specialization, and 256-wide heads are
// refused UNSUPPORTED naming the backend, the encoding and head_dim, in the
// problem's validation and in the spec's. The GPU side: [fa3_ws] and
// [rope_exact] in tests/single_prefill/gpu_test.cpp, [fa3_ws] and
// [fa3_ws_small] in tests/batch_prefill/gpu_test.cpp.
#include <catch2/catch.hpp>

#include "attnjit/error.hpp"
#include "support/error_capture.hpp"
#include "support/prefill_problems.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "prefill_ws_params.h"
#include "spec/prefill_kernel.hpp"

using namespace attnjit;
using attnjit::test::error_of;
using attnjit::test::prefill_of;

namespace {

SinglePrefillProblem single_rope(int head_dim) {
  SinglePrefillProblem p = test::single_prefill_problem(300, 5000, 8, 2, head_dim);
  p.options.causal = true;
  p.options.pos_encoding_mode = PosEncoding::RopeLlama;
  p.options.backend = "fa3_ws";
  return p;
}

ops::BatchPrefillShape batch_rope(int head_dim, KVSource source) {
  ops::BatchPrefillShape s = test::batch_prefill_shape({5, 295}, {40, 2000}, 12, 4, head_dim, DType::F16);
  s.options.pos_encoding_mode = PosEncoding::RopeLlama;
  s.options.backend = "fa3_ws";
  s.source = source;
  s.num_page_indices = 1000;
  return s;
}

}  // namespace

TEST_CASE("fa3_ws plans RoPE at head_dim 64 and 128, gathering K from every source", "[prefill][planner][fa3_ws]") {
  for (int d : {64, 128}) {
    INFO("head_dim " << d);
    const auto L = ops::plan_single_prefill(single_rope(d), {132});  // kept: prefill_of points into it
    const PrefillKernel& k = prefill_of(L.prefill);
    CHECK(k.warp_specialized);
    CHECK(k.variant.pos_encoding == PosEncoding::RopeLlama);
    CHECK(k.name().find("rope") != std::string::npos);
    for (KVSource src : {KVSource::Ragged, KVSource::Paged}) {
      const auto B = ops::plan_batch_prefill(batch_rope(d, src), {132});
      const PrefillKernel& b = prefill_of(B.prefill);
      CHECK(b.warp_specialized);
      CHECK(b.variant.pos_encoding == PosEncoding::RopeLlama);
      CHECK(b.kv_source == src);
    }
  }
  // The producer gathers (no TMA maps) with RoPE on every source; without it, contiguous and ragged go by TMA.
  CHECK_FALSE(kernels::prefill_ws_tma(true, kernels::kPosRopeLlama));
  CHECK(kernels::prefill_ws_tma(true, kernels::kPosNone));
  CHECK(kernels::prefill_ws_tma(true, kernels::kPosAlibi));
  CHECK_FALSE(kernels::prefill_ws_tma(false, kernels::kPosNone));
  // Producer + 2 x consumer registers stay within the CTA's 3 x 168 (setmaxnreg only moves them).
  for (bool tma : {true, false})
    for (int pos : {kernels::kPosNone, kernels::kPosRopeLlama}) {
      const int producer = kernels::prefill_ws_producer_regs(tma && pos != kernels::kPosRopeLlama, pos);
      CHECK(producer % 8 == 0);
      CHECK((3 * 168 - producer) / 2 / 8 * 8 >= 216);
    }
}

TEST_CASE("fa3_ws refuses RoPE at head_dim 256 naming backend, encoding and head_dim", "[prefill][planner][fa3_ws]") {
  const std::string msg = error_of([&] { ops::plan_single_prefill(single_rope(256), {132}); }, Status::Unsupported);
  CHECK_THAT(msg, Catch::Contains("backend='fa3_ws'") && Catch::Contains("ROPE_LLAMA") &&
                      Catch::Contains("head_dim=256") && Catch::Contains("'fa3'"));
  CHECK_THAT(error_of([&] { ops::plan_batch_prefill(batch_rope(256, KVSource::Paged), {132}); }, Status::Unsupported),
             Catch::Contains("head_dim=256"));
  // fa3 (not warp-specialized) and auto still plan it.
  for (const char* backend : {"fa3", "auto"}) {
    auto p = single_rope(256);
    p.options.backend = backend;
    const auto L = ops::plan_single_prefill(p, {132});
    CHECK_FALSE(prefill_of(L.prefill).warp_specialized);
  }
  // A spec asking for it directly is invalid.
  PrefillKernel k;
  k.backend = PrefillBackend::Fa3;
  k.warp_specialized = true;
  k.frags_m = 2;
  k.stages = 2;
  k.head_dim = 256;
  k.variant.q_dtype = k.variant.kv_dtype = k.variant.o_dtype = DType::BF16;
  k.variant.pos_encoding = PosEncoding::RopeLlama;
  CHECK_THAT(error_of([&] { k.validate(); }, Status::InvalidArgument), Catch::Contains("head_dim=256"));
  k.head_dim = 128;
  CHECK_NOTHROW(k.validate());
}

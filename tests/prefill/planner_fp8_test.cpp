// fp8 (e4m3) prefill on the warp-specialized Hopper kernel without a GPU:
// what the planners pick by themselves ('auto' -> fa3_ws on sm_90a, single
// and ragged batch), the spec (JSON round trip, template values, tile and
// shared memory from prefill_ws_params.h's fp8 figures), the merge kernel's
// output dtype, and every refusal naming its argument (Unsupported). The GPU
// side: [gpu][fa3_ws][fp8] in tests/prefill/gpu_fp8_test.cpp.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <string>

#include "attnjit/error.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/batch_prefill/batch_prefill_problem.hpp"
#include "ops/batch_prefill/batch_prefill_kernels.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "ops/single_prefill/single_prefill_problem.hpp"
#include "ops/tensor_checks.hpp"
#include "prefill_ws_params.h"
#include "spec/kernel_spec.hpp"
#include "spec/merge_kernel.hpp"
#include "spec/prefill_kernel.hpp"
#include "support/error_capture.hpp"
#include "support/prefill_problems.hpp"

using namespace attnjit;
using attnjit::test::error_of;
using attnjit::test::prefill_of;
using Catch::Matchers::Contains;

namespace {

SinglePrefillProblem single_fp8(int64_t qo, int64_t kv, int hq = 28, int hk = 4, DType o = DType::BF16) {
  SinglePrefillProblem p = test::single_prefill_problem(qo, kv, hq, hk, 128, DType::E4M3);
  p.options.o_dtype = o;
  return p;
}

ops::BatchPrefillShape ragged_fp8(DType o = DType::BF16) {
  ops::BatchPrefillShape s = test::batch_prefill_shape({1, 129, 1000}, {127, 2048, 1000}, 28, 4, 128, DType::E4M3);
  s.options.o_dtype = o;
  s.source = KVSource::Ragged;
  return s;
}

std::string single_error(const SinglePrefillProblem& p, const ops::DeviceFigures& d = {}) {
  return error_of([&] { ops::plan_single_prefill(p, d); }, Status::Unsupported);
}

}  // namespace

TEST_CASE("fp8 q: 'auto' plans the warp-specialized kernel on sm_90a, single and ragged",
          "[prefill][planner][fa3_ws][fp8]") {
  for (DType o : {DType::BF16, DType::F16}) {
    for (bool causal : {false, true}) {
      INFO("o " << to_string(o) << " causal " << causal);
      SinglePrefillProblem p = single_fp8(1000, 2048, 28, 4, o);
      p.options.causal = causal;
      const auto L = ops::plan_single_prefill(p, {132});
      const PrefillKernel& k = prefill_of(L.prefill);
      CHECK(k.backend == PrefillBackend::Fa3);
      CHECK(k.warp_specialized);
      CHECK(k.fp8());
      CHECK(k.variant.q_dtype == DType::E4M3);
      CHECK(k.variant.kv_dtype == DType::E4M3);
      CHECK(k.variant.o_dtype == o);
      CHECK(k.tile_kv() == 128);
      CHECK(L.prefill.shape.smem_bytes == k.dynamic_smem_bytes());
      CHECK(L.prefill.shape.threads == kernels::prefill_ws_threads());
      auto b = ragged_fp8(o);
      b.options.causal = causal;
      const auto B = ops::plan_batch_prefill(b, {132});
      const PrefillKernel& bk = prefill_of(B.prefill);
      CHECK(bk.warp_specialized);
      CHECK(bk.fp8());
      CHECK(bk.kv_source == KVSource::Ragged);
      CHECK(bk.variant.o_dtype == o);
    }
  }
  // A custom mask and a window are served.
  SinglePrefillProblem p = single_fp8(129, 1000);
  p.options.custom_mask = true;
  CHECK(prefill_of(ops::plan_single_prefill(p, {132}).prefill).variant.mask == MaskMode::Custom);
  p.options.custom_mask = false;
  p.options.causal = true;
  p.options.window_left = 100;
  const auto W = ops::plan_single_prefill(p, {132});
  CHECK(prefill_of(W.prefill).window);
  CHECK(prefill_of(W.prefill).tile_kv() == 128);
  // Naming the backend plans the same kernel.
  p.options.backend = "fa3_ws";
  CHECK(prefill_of(ops::plan_single_prefill(p, {132}).prefill) == prefill_of(W.prefill));
}

TEST_CASE("fp8 q: a split KV merges into the output's dtype", "[prefill][planner][fa3_ws][fp8]") {
  // One query token against a long KV splits (plan_kv_split); the merge writes o's dtype, not q's.
  const auto L = ops::plan_single_prefill(single_fp8(1, 32768, 8, 8, DType::F16), {132});
  REQUIRE(L.merge);
  const auto* m = L.merge->spec.as<MergeKernel>();
  REQUIRE(m);
  CHECK(m->to_json().dump().find("float16") != std::string::npos);
  CHECK(m->to_json().dump().find("float8") == std::string::npos);
  bool merge_listed = false;
  for (const KernelSpec& s : ops::single_prefill_kernels(single_fp8(1, 1)))
    if (const auto* mk = s.as<MergeKernel>()) merge_listed = mk->to_json().dump().find("bfloat16") != std::string::npos;
  CHECK(merge_listed);
}

TEST_CASE("fp8 q: prewarm lists only the warp-specialized kernel", "[prefill][planner][fa3_ws][fp8]") {
  int prefill = 0;
  for (const KernelSpec& s : ops::single_prefill_kernels(single_fp8(1, 1))) {
    if (const auto* k = s.as<PrefillKernel>()) {
      ++prefill;
      CHECK(k->warp_specialized);
      CHECK(k->fp8());
      CHECK_NOTHROW(k->validate());
    }
  }
  CHECK(prefill >= 1);
}

TEST_CASE("fp8 prefill spec: JSON round trip, template values, tile and shared memory", "[prefill][spec][fa3_ws][fp8]") {
  const auto L = ops::plan_single_prefill(single_fp8(2048, 2048, 28, 4), {132});
  const PrefillKernel& k = prefill_of(L.prefill);
  const nlohmann::json j = k.to_json();
  CHECK(j.at("q_dtype") == "float8_e4m3fn");
  CHECK(j.at("kv_dtype") == "float8_e4m3fn");
  CHECK(j.at("o_dtype") == "bfloat16");
  const PrefillKernel back = PrefillKernel::from_json(j);
  CHECK(back == k);
  CHECK(KernelSpec::from_json(KernelSpec(k).to_json()).identity() == KernelSpec(k).identity());
  bool q = false, kv = false, o = false;
  for (const auto& [key, value] : k.template_values()) {
    if (key == "Q_TYPE") q = value == "e4m3";
    if (key == "KV_TYPE") kv = value == "e4m3";
    if (key == "O_TYPE") o = value == "bf16";
  }
  CHECK(q);
  CHECK(kv);
  CHECK(o);
  CHECK(k.name().find("e4m3_e4m3_bf16") != std::string::npos);
  // prefill_ws_params.h's fp8 figures.
  CHECK(k.ws_tile_kv() == 128);
  const int qb = kernels::prefill_ws_q_buffers(128, 128, 2, k.persistent, true);
  CHECK(k.dynamic_smem_bytes() == kernels::prefill_ws_smem_bytes(128, 128, 2, qb, true));
  CHECK(k.dynamic_smem_bytes() <= kernels::prefill_ws_smem_limit());
  // A non-persistent fp8 kernel: one Q tile of 16-bit rows, K, V and V's landing tile in bytes, 5 barriers a stage.
  PrefillKernel np = k;
  np.persistent = false;
  CHECK(np.dynamic_smem_bytes() == 1024 + 128 * 128 * 2 + 3 * 2 * 128 * 128 + 5 * 2 * 8);
  // The 16-bit kernel of the same shape keeps its figures.
  PrefillKernel k16 = np;
  k16.variant.q_dtype = k16.variant.kv_dtype = k16.variant.o_dtype = DType::BF16;
  CHECK(k16.dynamic_smem_bytes() == kernels::prefill_ws_smem_bytes(128, k16.ws_tile_kv(), 2, 1));
  CHECK(k16.ws_tile_kv() == 176);
}

TEST_CASE("fp8 prefill spec: validation names the field", "[prefill][spec][fa3_ws][fp8]") {
  const auto L = ops::plan_single_prefill(single_fp8(300, 300), {132});
  const PrefillKernel good = prefill_of(L.prefill);
  auto spec_error = [](PrefillKernel k) { return error_of([&] { k.validate(); }, Status::InvalidArgument); };
  PrefillKernel k = good;
  k.warp_specialized = false;
  k.persistent = false;
  CHECK_THAT(spec_error(k), Contains("warp_specialized"));
  k = good;
  k.head_dim = 64;
  CHECK_THAT(spec_error(k), Contains("head_dim=64"));
  k = good;
  k.variant.kv_dtype = DType::BF16;
  CHECK_THAT(spec_error(k), Contains("kv_dtype=bfloat16"));
  k = good;
  k.variant.o_dtype = DType::E4M3;
  CHECK_THAT(spec_error(k), Contains("o_dtype=float8_e4m3fn"));
  k = good;
  k.kv_source = KVSource::Paged;
  CHECK_THAT(spec_error(k), Contains("kv_source=paged"));
  k = good;
  k.variant.soft_cap = true;
  CHECK_THAT(spec_error(k), Contains("soft_cap"));
  // 16-bit kernels still need o_dtype == q_dtype.
  k = good;
  k.variant.q_dtype = k.variant.kv_dtype = DType::F16;
  k.variant.o_dtype = DType::BF16;
  CHECK_THAT(spec_error(k), Contains("o_dtype=bfloat16 must equal q_dtype=float16"));
  // Other families keep refusing fp8 q.
  VariantSpec v;
  v.q_dtype = v.kv_dtype = DType::E4M3;
  v.o_dtype = DType::BF16;
  CHECK_THAT(error_of([&] { v.validate("decode"); }, Status::InvalidArgument), Contains("q_dtype=float8_e4m3fn"));
}

TEST_CASE("fp8 q: refusals name the argument, its value and what is allowed", "[prefill][planner][fa3_ws][fp8]") {
  SinglePrefillProblem p = single_fp8(300, 300);
  p.options.o_dtype.reset();  // FlashInfer's default o_dtype is q's: an fp8 output, which is not written
  std::string m = single_error(p);
  CHECK_THAT(m, Contains("o_dtype=None"));
  CHECK_THAT(m, Contains("float16, bfloat16"));
  p.options.o_dtype = DType::E4M3;
  CHECK_THAT(single_error(p), Contains("o_dtype=float8_e4m3fn"));

  p = single_fp8(300, 300);
  p.q_dtype = p.kv_dtype = DType::E5M2;
  CHECK_THAT(single_error(p), Contains("q.dtype=float8_e5m2"));
  p = single_fp8(300, 300);
  p.kv_dtype = DType::BF16;
  CHECK_THAT(single_error(p), Contains("k.dtype=bfloat16"));
  p = single_fp8(300, 300);
  p.kv_dtype = DType::E5M2;
  CHECK_THAT(single_error(p), Contains("k.dtype=float8_e5m2"));

  p = single_fp8(300, 300);
  p.head_dim = 64;
  CHECK_THAT(single_error(p), Contains("head_dim=64"));
  for (const char* backend : {"fa2", "fa3"}) {
    p = single_fp8(300, 300);
    p.options.backend = backend;
    m = single_error(p);
    CHECK_THAT(m, Contains(std::string("backend='") + backend + "'"));
    CHECK_THAT(m, Contains("'fa3_ws'"));
  }
  for (PosEncoding pe : {PosEncoding::RopeLlama, PosEncoding::Alibi}) {
    p = single_fp8(300, 300);
    p.options.pos_encoding_mode = pe;
    CHECK_THAT(single_error(p), Contains(std::string("pos_encoding_mode=") + to_string(pe)));
  }
  p = single_fp8(300, 300);
  p.options.logits_soft_cap = 30.f;
  CHECK_THAT(single_error(p), Contains("logits_soft_cap=30"));

  // Off Hopper, 'auto' and 'fa3_ws' refuse fp8 q naming the arch.
  for (const char* backend : {"auto", "fa3_ws"}) {
    p = single_fp8(300, 300);
    p.options.backend = backend;
    ops::DeviceFigures ampere;
    ampere.arch = "sm_80";
    m = single_error(p, ampere);
    CHECK_THAT(m, Contains("sm_80"));
    CHECK_THAT(m, Contains("float8_e4m3fn"));
  }

  // 16-bit q: another output dtype is refused naming o_dtype.
  SinglePrefillProblem h = test::single_prefill_problem(300, 300, 8, 8, 128, DType::F16);
  h.options.o_dtype = DType::BF16;
  CHECK_THAT(single_error(h), Contains("o_dtype=bfloat16"));
  h.options.o_dtype = DType::F16;  // its own dtype is fine
  CHECK_NOTHROW(ops::plan_single_prefill(h, {132}));

  // A paged cache with fp8 q is refused; ragged is served.
  ops::BatchPrefillShape b = ragged_fp8();
  b.source = KVSource::Paged;
  b.num_page_indices = 300;
  m = error_of([&] { ops::plan_batch_prefill(b, {132}); }, Status::Unsupported);
  CHECK_THAT(m, Contains("paged"));
  b = ragged_fp8();
  b.options.o_dtype.reset();
  CHECK_THAT(error_of([&] { ops::plan_batch_prefill(b, {132}); }, Status::Unsupported), Contains("o_dtype"));
}

TEST_CASE("fp8 q: the problem's JSON form carries o_dtype", "[prefill][problem][fp8]") {
  const SinglePrefillProblem p = single_fp8(300, 400);
  const nlohmann::json j = ops::to_json(p);
  CHECK(j.at("o_dtype") == "bfloat16");
  const SinglePrefillProblem back = ops::single_prefill_problem_from_json(j);
  CHECK(back.options.o_dtype == DType::BF16);
  CHECK(back.q_dtype == DType::E4M3);
  CHECK(ops::to_json(back) == j);
  // Unset o_dtype stays out of a 16-bit problem's JSON (its memo and cache keys as before).
  CHECK_FALSE(ops::to_json(test::single_prefill_problem(3, 4, 8, 8, 128)).contains("o_dtype"));
  nlohmann::json bj = {{"op", "batch_prefill"}, {"kv_source", "paged"},  {"num_qo_heads", 8},
                       {"num_kv_heads", 8},     {"head_dim", 128},       {"q_dtype", "float8_e4m3fn"},
                       {"kv_dtype", "float8_e4m3fn"}, {"o_dtype", "bfloat16"}};
  CHECK_THAT(error_of([&] { ops::batch_prefill_problem_from_json(bj); }, Status::Unsupported), Contains("paged"));
  bj["kv_source"] = "ragged";
  const auto bp = ops::batch_prefill_problem_from_json(bj);
  int ws = 0;
  for (const KernelSpec& s : ops::batch_prefill_kernels(bp))
    if (const auto* k = s.as<PrefillKernel>()) ws += k->warp_specialized && k->fp8();
  CHECK(ws >= 1);
}

TEST_CASE("fp8 q: per-head scale tensors are checked by name", "[prefill][fp8]") {
  float dummy[64];
  const TensorView sq = make_tensor(dummy, DType::F32, {28}, 0);
  const TensorView sk = make_tensor(dummy, DType::F32, {4}, 0);
  const TensorView wrong_shape = make_tensor(dummy, DType::F32, {5}, 0);
  const TensorView wrong_dtype = make_tensor(dummy, DType::F16, {4}, 0);
  PrefillScales s{&sq, &sk, &sk};
  const auto ok = ops::check_head_scales(&s, DType::E4M3, 28, 4, 0);
  CHECK(ok.q == dummy);
  CHECK(ok.v == dummy);
  CHECK(ops::check_head_scales(nullptr, DType::E4M3, 28, 4, 0).q == nullptr);
  s.scale_v = &wrong_shape;
  CHECK_THAT(error_of([&] { ops::check_head_scales(&s, DType::E4M3, 28, 4, 0); }, Status::InvalidArgument),
             Contains("scale_v"));
  s.scale_v = nullptr;
  s.scale_k = &wrong_dtype;
  CHECK_THAT(error_of([&] { ops::check_head_scales(&s, DType::E4M3, 28, 4, 0); }, Status::InvalidArgument),
             Contains("scale_k"));
  s.scale_k = nullptr;
  s.scale_q = &sk;  // [4], not [num_qo_heads]
  CHECK_THAT(error_of([&] { ops::check_head_scales(&s, DType::E4M3, 28, 4, 0); }, Status::InvalidArgument),
             Contains("scale_q"));
  s.scale_q = &sq;
  CHECK_THAT(error_of([&] { ops::check_head_scales(&s, DType::BF16, 28, 4, 0); }, Status::Unsupported),
             Contains("scale_q"));
}

// A user variant through every attention operator's planner, on the CPU: the
// kernels each plan chooses carry the variant's source, a mask_mod plans
// prefill's Custom mode and never lands on fa3_ws unless fa3_ws was named
// (then Unsupported), decode keeps its mode, and the problem JSON (the
// one-call entry points' memo key) carries the source.
#include <catch2/catch.hpp>

#include <memory>

#include "attnjit/batch_decode.hpp"
#include "attnjit/error.hpp"
#include "attnjit/prefill.hpp"
#include "attnjit/single_decode.hpp"
#include "attnjit/variant.hpp"
#include "reference/decode_grid.hpp"
#include "support/error_capture.hpp"
#include "support/prefill_problems.hpp"
#include "ops/batch_decode/batch_decode_planner.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_decode/single_decode_problem.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "ops/single_prefill/single_prefill_problem.hpp"
#include "spec/kernel_spec.hpp"

using namespace attnjit;
using attnjit::test::error_of;

namespace {

std::shared_ptr<const Variant> windowed_docs() {
  return std::make_shared<const Variant>(
      "", "return p.doc_at(q) == p.doc_at(kv) && q - kv < p.window;",
      std::vector<VariantParam>{{"doc", VariantParamType::I32, 1}, {"window", VariantParamType::I32, 0}});
}
std::shared_ptr<const Variant> tanh_cap() {
  return std::make_shared<const Variant>("return p.cap * tanhf(s / p.cap);", "",
                                         std::vector<VariantParam>{{"cap", VariantParamType::F32, 0}});
}

SinglePrefillProblem prefill_problem(std::shared_ptr<const Variant> v, const std::string& backend = "auto") {
  SinglePrefillProblem p = test::single_prefill_problem(1000, 1000, 32, 8, 128);
  p.options.backend = backend;
  p.options.variant = std::move(v);
  return p;
}

// The decode problems' base, at f16 (the problem's default dtypes): 8 query heads over 2 KV heads, d 128.
SingleDecodeProblem decode_problem(int64_t kv_len, std::shared_ptr<const Variant> v) {
  SingleDecodeProblem p = test::d128_decode_problem(8, 2, kv_len, DType::F16);
  p.q_dtype = DType::F16;
  p.options.variant = std::move(v);
  return p;
}

// The kernel a plan launches first, REQUIREd to be a K carrying the user variant; its mask mode CHECKed.
template <class K>
const K& user_kernel(const ops::KernelLaunch& launch, MaskMode mask) {
  const K* k = launch.spec.as<K>();
  REQUIRE(k);
  REQUIRE(k->variant.user);
  CHECK(k->variant.mask == mask);
  return *k;
}

const PrefillKernel& prefill_kernel(const ops::SinglePrefillLayout& L) { return *L.prefill.spec.as<PrefillKernel>(); }

}  // namespace

TEST_CASE("user variant, single prefill: the kernel carries it; a mask_mod plans Custom, on fa3_ws under auto",
          "[user_variant][prefill][planner]") {
  const auto mask = windowed_docs();
  const auto L = ops::plan_single_prefill(prefill_problem(mask), {});
  const PrefillKernel& k = prefill_kernel(L);
  REQUIRE(k.variant.user);
  CHECK(*k.variant.user == mask->source());
  CHECK(k.variant.mask == MaskMode::Custom);
  CHECK(k.backend == PrefillBackend::Fa3);
  CHECK(k.warp_specialized);  // auto's choice at head_dim 128, as without a variant
  CHECK(L.prefill.spec.name().find("_user") != std::string::npos);
  // prewarm's list for an "auto" problem: every kernel carries the variant, fa3_ws among them.
  bool ws_listed = false;
  for (const KernelSpec& s : ops::single_prefill_kernels(prefill_problem(mask)))
    if (const auto* pk = s.as<PrefillKernel>()) {
      CHECK(pk->variant.user);
      ws_listed = ws_listed || pk->warp_specialized;
    }
  CHECK(ws_listed);
  // fa2 and fa3 named: planned there.
  CHECK(prefill_kernel(ops::plan_single_prefill(prefill_problem(mask, "fa2"), {})).backend == PrefillBackend::Fa2);
  CHECK(prefill_kernel(ops::plan_single_prefill(prefill_problem(mask, "fa3"), {})).backend == PrefillBackend::Fa3);
  // A score_mod keeps the planned mode (none here).
  const auto SL = ops::plan_single_prefill(prefill_problem(tanh_cap()), {});
  const PrefillKernel& sk = prefill_kernel(SL);
  REQUIRE(sk.variant.user);
  CHECK(sk.variant.mask == MaskMode::None);
}

TEST_CASE("user variant, single prefill: refusals name the option and the backend", "[user_variant][prefill][planner]") {
  // A mask_mod and a score_mod run on fa3_ws by name.
  CHECK(prefill_kernel(ops::plan_single_prefill(prefill_problem(windowed_docs(), "fa3_ws"), {})).warp_specialized);
  CHECK(prefill_kernel(ops::plan_single_prefill(prefill_problem(tanh_cap(), "fa3_ws"), {})).warp_specialized);

  auto causal = prefill_problem(windowed_docs());
  causal.options.causal = true;
  CHECK_THAT(error_of([&] { ops::plan_single_prefill(causal, {}); }, Status::InvalidArgument),
             Catch::Contains("causal=True"));
  auto custom = prefill_problem(windowed_docs());
  custom.options.custom_mask = true;
  CHECK_THAT(error_of([&] { ops::plan_single_prefill(custom, {}); }, Status::InvalidArgument),
             Catch::Contains("custom_mask"));
}

TEST_CASE("user variant: the problem JSON carries the source; read back it plans the same kernel",
          "[user_variant][prefill][decode]") {
  const auto with = ops::to_json(prefill_problem(windowed_docs()));
  const auto without = ops::to_json(prefill_problem(nullptr));
  CHECK_FALSE(without.contains("variant"));  // built-in problems keep their JSON
  REQUIRE(with.contains("variant"));
  CHECK(with.dump() != ops::to_json(prefill_problem(tanh_cap())).dump());  // two variants, two memo keys
  const SinglePrefillProblem back = ops::single_prefill_problem_from_json(with);
  REQUIRE(back.options.variant);
  CHECK(back.options.variant->source() == windowed_docs()->source());
  CHECK(ops::plan_single_prefill(back, {}).prefill.spec == ops::plan_single_prefill(prefill_problem(windowed_docs()), {}).prefill.spec);
  auto bad = with;
  bad["variant"] = {{"mask_mod", 3}};
  CHECK_THAT(error_of([&] { ops::single_prefill_problem_from_json(bad); }, Status::InvalidArgument),
             Catch::Contains("problem.variant.mask_mod"));

  const SingleDecodeProblem d = decode_problem(777, tanh_cap());
  const auto dj = ops::to_json(d);
  REQUIRE(dj.contains("variant"));
  REQUIRE(ops::single_decode_problem_from_json(dj).options.variant);
  CHECK(ops::single_decode_problem_from_json(dj).options.variant->source() == tanh_cap()->source());
}

TEST_CASE("user variant, decode: single and batch kernels carry it and keep their mode; draft refused",
          "[user_variant][decode][planner]") {
  const SingleDecodeProblem d = decode_problem(5000, windowed_docs());
  user_kernel<DecodeKernel>(ops::plan_single_decode(d, {}).decode, MaskMode::None);
  for (const KernelSpec& s : ops::single_decode_kernels(d))
    if (const auto* k = s.as<DecodeKernel>()) CHECK(k->variant.user);

  BatchDecodeProblem b;
  b.batch_size = 4;
  b.num_qo_heads = 8;
  b.num_kv_heads = 2;
  b.head_dim = 128;
  b.q_len_per_req = 3;  // speculative: causal keys, the mask_mod tests them
  b.options.variant = windowed_docs();
  user_kernel<DecodeKernel>(ops::plan_batch_decode(b, {}).decode, MaskMode::Causal);
  CHECK(ops::to_json(b).contains("variant"));

  b.draft_mask = true;
  CHECK_THAT(error_of([&] { ops::plan_batch_decode(b, {}); }, Status::InvalidArgument),
             Catch::Contains("draft-tree mask"));
}

TEST_CASE("user variant, batch prefill: ragged and paged kernels carry it, on fa3_ws under auto",
          "[user_variant][prefill][planner]") {
  for (KVSource source : {KVSource::Ragged, KVSource::Paged}) {
    ops::BatchPrefillShape s;
    s.qo_indptr = {0, 5, 300, 301};
    s.kv_lens = {5, 700, 40};
    s.num_qo_heads = 12;
    s.num_kv_heads = 4;
    s.head_dim = 128;
    s.q_dtype = s.kv_dtype = DType::F16;
    s.source = source;
    s.num_page_indices = source == KVSource::Paged ? 100 : 0;
    s.options.variant = windowed_docs();
    const auto L = ops::plan_batch_prefill(s, {});
    // auto's Hopper skeleton at head_dim 128
    CHECK(user_kernel<PrefillKernel>(L.prefill, MaskMode::Custom).warp_specialized);
    s.options.backend = "fa3_ws";
    CHECK(ops::plan_batch_prefill(s, {}).prefill.spec.as<PrefillKernel>()->variant.user);
  }
}

// When a block-sparse variant's tiles are classified (Reclassify, issue 31
// item 2: "reusable across calls") without a GPU: the policy's JSON field in
// C++, C and the CLI, its refusals by name, that it is no part of the
// source's identity (same kernels and plans for both), and the values
// version a kept block mask is checked against.
#include <catch2/catch.hpp>

#include <fstream>
#include <memory>
#include <string>

#include "attnjit/attnjit_variant.h"
#include "attnjit/error.hpp"
#include "attnjit/variant.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "spec/user_variant.hpp"
#include "support/c_runtime.hpp"
#include "support/cache_support.hpp"
#include "support/cli_process.hpp"
#include "support/error_capture.hpp"
#include "support/prefill_problems.hpp"

namespace attnjit::test {

namespace {

nlohmann::json documents(const char* reclassify) {
  nlohmann::json j = {{"mask_mod", "return p.doc_at(q) == p.doc_at(kv);"},
                      {"params", {{{"name", "doc"}, {"type", "i32"}, {"rank", 1}}}},
                      {"block_sparse", true}};
  if (reclassify) j["reclassify"] = reclassify;
  return j;
}

}  // namespace

TEST_CASE("reclassify: parsed from the variant's JSON, checked, not part of the source's identity",
          "[block_sparse][reclassify]") {
  CHECK(variant_source_from_json(documents(nullptr), "v").reclassify == Reclassify::EachRun);
  CHECK(variant_source_from_json(documents("each_run"), "v").reclassify == Reclassify::EachRun);
  const VariantSource kept = variant_source_from_json(documents("on_bind"), "v");
  CHECK(kept.reclassify == Reclassify::OnBind);
  // Same kernels and plans for both policies: the identity leaves it out.
  CHECK_FALSE(variant_source_json(kept).contains("reclassify"));
  CHECK(kept == variant_source_from_json(documents(nullptr), "v"));
  CHECK(variant_source_digest(kept) == variant_source_digest(variant_source_from_json(documents(nullptr), "v")));
  CHECK(to_string(Reclassify::OnBind) == std::string("on_bind"));
  CHECK(to_string(Reclassify::EachRun) == std::string("each_run"));

  CHECK_THAT(error_of([] { variant_source_from_json(documents("sometimes"), "variant"); }, Status::InvalidArgument),
             Catch::Contains("variant.reclassify='sometimes' is not allowed") &&
                 Catch::Contains("'each_run', 'on_bind'"));
  nlohmann::json number = documents(nullptr);
  number["reclassify"] = 1;
  CHECK_THAT(error_of([&] { variant_source_from_json(number, "variant"); }, Status::InvalidArgument),
             Catch::Contains("variant.reclassify=1 is not allowed"));
  nlohmann::json dense = documents("on_bind");
  dense.erase("block_sparse");
  CHECK_THAT(error_of([&] { variant_source_from_json(dense, "variant"); }, Status::InvalidArgument),
             Catch::Contains("reclassify='on_bind'") && Catch::Contains("block_sparse"));
  // Unknown fields still name the allowed ones, reclassify among them.
  nlohmann::json extra = documents(nullptr);
  extra["reclasify"] = "on_bind";
  CHECK_THAT(error_of([&] { variant_source_from_json(extra, "variant"); }, Status::InvalidArgument),
             Catch::Contains("variant.reclasify is not a field") && Catch::Contains("reclassify"));
}

TEST_CASE("a plan is the same for both policies", "[block_sparse][reclassify][planner]") {
  VariantSource each = variant_source_from_json(documents(nullptr), "v"), kept = each;
  kept.reclassify = Reclassify::OnBind;
  SinglePrefillProblem a = single_prefill_problem(1000, 1000, 32, 8, 128), b = a;
  a.options.variant = std::make_shared<const Variant>(each);
  b.options.variant = std::make_shared<const Variant>(kept);
  const auto la = ops::plan_single_prefill(a, {}), lb = ops::plan_single_prefill(b, {});
  CHECK(la.to_json() == lb.to_json());  // the workspace keeps the region: a capturing run classifies there
  REQUIRE(lb.block_mask);
  CHECK(lb.workspace.has("block_mask"));
}

TEST_CASE("values_version: new at every bind and unbind, unique across variants, kept by a copy",
          "[block_sparse][reclassify]") {
  VariantSource s;
  s.mask_mod = "return kv <= q + p.shift;";
  s.params = {{"shift", VariantParamType::I32, 0}};
  s.block_sparse = true;
  s.reclassify = Reclassify::OnBind;
  Variant a(s), b(s);
  CHECK(a.values_version() != 0);
  CHECK(a.values_version() != b.values_version());
  const uint64_t v0 = a.values_version();
  a.bind("shift", int32_t(3));
  const uint64_t v1 = a.values_version();
  CHECK(v1 != v0);
  a.bind("shift", int32_t(3));  // the same value: still a bind, still seen (no comparison of values)
  CHECK(a.values_version() != v1);
  const Variant copy = a;
  CHECK(copy.values_version() == a.values_version());
  const uint64_t v2 = a.values_version();
  a.unbind("shift");
  CHECK(a.values_version() != v2);
  // A refused bind changes nothing.
  const uint64_t v3 = a.values_version();
  CHECK_THROWS_AS(a.bind("shift", 1.5f), Error);
  CHECK(a.values_version() == v3);
}

TEST_CASE("C: attnjit_variant_create_from_json takes reclassify and refuses other values by name",
          "[block_sparse][reclassify][capi]") {
  attnjit_variant_t* v = nullptr;
  REQUIRE(attnjit_variant_create_from_json(documents("on_bind").dump().c_str(), &v) == ATTNJIT_OK);
  REQUIRE(v != nullptr);
  attnjit_variant_destroy(v);
  v = nullptr;
  expect_refused(attnjit_variant_create_from_json(documents("never").dump().c_str(), &v),
                 Catch::Contains("variant.reclassify='never' is not allowed") && Catch::Contains("'on_bind'"));
  CHECK(v == nullptr);
  nlohmann::json dense = documents("on_bind");
  dense["block_sparse"] = false;
  expect_refused(attnjit_variant_create_from_json(dense.dump().c_str(), &v),
                 Catch::Contains("reclassify='on_bind'"));
}

TEST_CASE("attnjit explain --variant FILE takes reclassify and names a bad value", "[block_sparse][reclassify][cli]") {
  TempDir tmp;
  const fs::path kept = tmp.path() / "kept.json", bad = tmp.path() / "bad.json";
  std::ofstream(kept) << documents("on_bind").dump();
  std::ofstream(bad) << documents("always").dump();
  const std::string explain = "explain --op single_prefill --model llama-3.1-8b --arch sm_80 --variant ";
  expect_cli(tmp.path(), {{explain + shell_quote(kept.string()), 0, {"block_mask_user"}},
                          {explain + shell_quote(bad.string()), 2, {"problem.variant.reclassify='always'", "on_bind"}}});
}

}  // namespace attnjit::test

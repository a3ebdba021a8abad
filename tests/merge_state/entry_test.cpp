// merge_state in the operator registry, on the CPU: its JSON form round
// trips and its checks name the field; each function lists the one merge
// kernel for V's head dim and dtype (16-bit states in, as merge_state.cpp
// launches it) and explains one CTA per output row.
#include <catch2/catch.hpp>
#include <set>

#include "support/error_capture.hpp"
#include "ops/merge_state/merge_state_problem.hpp"
#include "ops/registry.hpp"

using namespace attnjit;
using attnjit::test::error_of;
using json = nlohmann::json;

TEST_CASE("merge_state problems round-trip through their JSON form", "[merge_state][registry]") {
  const json j = {{"op", "merge_state"}, {"function", "merge_states"},
                  {"head_dim", 256},     {"dtype", "float16"},
                  {"num_heads", 8},      {"seq_len", 100},
                  {"num_states", 5},     {"device", 2}};
  const auto p = ops::merge_state_problem_from_json(j);
  CHECK(p.function == ops::MergeFunction::MergeStates);
  CHECK(p.num_states == 5);
  CHECK(ops::to_json(p) == j);
  // Defaults: merge_state of two bfloat16 states; sizes only when given.
  const auto d = ops::merge_state_problem_from_json({{"op", "merge_state"}, {"head_dim", 64}});
  CHECK(d.function == ops::MergeFunction::MergeState);
  CHECK(d.dtype == DType::BF16);
  CHECK_FALSE(d.has_sizes());
  CHECK(ops::to_json(d) ==
        json{{"op", "merge_state"}, {"function", "merge_state"}, {"head_dim", 64}, {"dtype", "bfloat16"}});
}

TEST_CASE("merge_state problems are checked field by field", "[merge_state][registry]") {
  auto err = [](json j, Status s = Status::InvalidArgument) {
    j["op"] = "merge_state";
    return error_of([&] { ops::merge_state_problem_from_json(j); }, s);
  };
  CHECK_THAT(err({{"head_dim", 128}, {"heads", 4}}),
             Catch::Contains("problem.heads is not a merge_state field; allowed:"));
  CHECK_THAT(err({{"dtype", "float16"}}), Catch::Contains("problem.head_dim is missing"));
  CHECK_THAT(err({{"head_dim", 512}}, Status::Unsupported),
             Catch::Contains("head_dim=512 is not supported; supported: 64, 128, 256"));
  CHECK_THAT(err({{"head_dim", 128}, {"dtype", "float32"}}),
             Catch::Contains("dtype=float32 is not supported; allowed: float16, bfloat16"));
  CHECK_THAT(
      err({{"head_dim", 128}, {"function", "merge"}}),
      Catch::Contains("problem.function='merge' is not allowed; allowed: 'merge_state', 'merge_state_in_place'"));
  CHECK_THAT(err({{"head_dim", 128}, {"num_states", 3}}),
             Catch::Contains("num_states=3 is not allowed with function='merge_state', which merges 2 states"));
  CHECK_THAT(err({{"head_dim", 128}, {"function", "merge_states"}, {"num_states", 0}}),
             Catch::Contains("num_states=0 is not allowed; merge_states needs >= 1"));
  CHECK_THAT(err({{"head_dim", 128}, {"num_heads", 0}}), Catch::Contains("problem.num_heads=0 is not allowed"));
  CHECK_THAT(err({{"head_dim", 128}, {"seq_len", -1}}), Catch::Contains("problem.seq_len=-1 is not allowed"));
  CHECK_THAT(err({{"head_dim", 128}, {"num_heads", 64}, {"seq_len", int64_t(1) << 30}}),
             Catch::Contains("seq_len * num_heads=68719476736 is not allowed"));
  CHECK_THAT(err({{"head_dim", 128}, {"dtype", 16}}),
             Catch::Contains("problem.dtype=16 is not allowed; expected a string"));
}

TEST_CASE("merge_state lists its one kernel per head dim and dtype and explains one CTA per row",
          "[merge_state][registry]") {
  const auto& op = ops::find_operator("merge_state");
  for (const char* function : {"merge_state", "merge_state_in_place", "merge_states"}) {
    const auto specs =
        op.kernels_for({{"op", "merge_state"}, {"function", function}, {"head_dim", 128}, {"dtype", "float16"}});
    REQUIRE(specs.size() == 1);
    const auto* m = specs[0].as<MergeKernel>();
    REQUIRE(m);
    CHECK(m->head_dim == 128);
    CHECK(m->o_dtype == DType::F16);
    CHECK(m->in_dtype == DType::F16);  // the states are V in its own dtype, not fp32 partials
    CHECK(specs[0].name() == "merge_states_d128_f16_w4_in_f16");
  }
  const json plan = op.explain({{"op", "merge_state"}, {"head_dim", 64}, {"num_heads", 32}, {"seq_len", 1000}}, {132});
  INFO(plan.dump());
  REQUIRE(plan.at("kernels").size() == 1);
  CHECK(plan.at("kernels")[0].at("grid") == json({32000, 1, 1}));
  CHECK(KernelSpec::from_json(plan.at("kernels")[0].at("spec")).name() == "merge_states_d64_bf16_w4_in_bf16");
  CHECK(plan.at("rows") == 32000);
  CHECK_THAT(error_of(
                 [&] {
                   op.explain({{"op", "merge_state"}, {"head_dim", 64}, {"num_heads", 32}}, {132});
                 },
                 Status::InvalidArgument),
             Catch::Contains("seq_len=-1 do not give a launch"));
  // The grid covers every head dim in both dtypes once.
  std::set<std::string> grid;
  for (const auto& p : op.variant_grid())
    for (const auto& k : op.kernels_for(p)) grid.insert(k.name());
  CHECK(grid.size() == 6);
  // A model's deployment merges in bfloat16 and float16 at its head dim.
  std::set<std::string> model;
  for (const auto& p : op.model_problems({32, 8, 128, 0.f}))
    for (const auto& k : op.kernels_for(p)) model.insert(k.name());
  CHECK(model == std::set<std::string>{"merge_states_d128_bf16_w4_in_bf16", "merge_states_d128_f16_w4_in_f16"});
}

// The operator contract's host pieces: workspace layouts with named regions,
// problems' JSON round trip, and plans that need no GPU.
#include <catch2/catch.hpp>

#include "attnjit/error.hpp"
#include "ops/batch_decode/batch_decode_planner.hpp"
#include "ops/registry.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_decode/single_decode_problem.hpp"
#include "ops/workspace_layout.hpp"
#include "reference/decode_grid.hpp"

using namespace attnjit;

TEST_CASE("workspace layouts: scratch in the caller's workspace, plan data in the plan's memory", "[contract]") {
  ops::WorkspaceLayout w;
  CHECK(w.add_float("partial_o", 1000) == 0);
  CHECK(w.add_int("work_items", 12) == 0);  // its own part: plan memory starts at 0
  CHECK(w.add_float("partial_lse", 4) == 1024);
  CHECK(w.add_int("indptr", 300) == 256);
  CHECK(w.float_bytes() == 1280);
  CHECK(w.int_bytes() == 768);
  CHECK(w.region("partial_lse").bytes == 4);
  CHECK(w.region("work_items").is_int);
  CHECK_FALSE(w.region("partial_o").is_int);
  CHECK_THROWS_AS(w.region("nope"), Error);
  CHECK_THROWS_AS(w.add_int("work_items", 8), Error);  // twice
  CHECK(w.to_json().at("regions").size() == 4);
  CHECK(w.to_json().at("int_bytes") == 768);
}

TEST_CASE("single decode problems round-trip through their JSON form", "[contract]") {
  SingleDecodeProblem p = test::d128_decode_problem(28, 4, 12345, DType::E4M3);
  p.device = 1;
  p.options.kv_layout = KVLayout::HND;
  p.options.pos_encoding_mode = PosEncoding::RopeLlama;
  p.options.window_left = 100;
  p.options.logits_soft_cap = 30.f;
  p.options.rope_theta = 5e5f;
  p.options.k_scale = 0.5f;
  p.options.return_lse = true;
  const auto j = ops::to_json(p);
  const SingleDecodeProblem back = ops::single_decode_problem_from_json(j);
  CHECK(ops::to_json(back) == j);
  CHECK(back.options.rope_theta == 5e5f);
  CHECK(back.kv_dtype == DType::E4M3);
  auto bad = j;
  bad["num_kv_heads"] = 5;  // 28 is not a multiple
  CHECK_THROWS_WITH(ops::single_decode_problem_from_json(bad), Catch::Contains("multiple of num_kv_heads=5"));
  bad = j;
  bad["head_dims"] = 128;
  CHECK_THROWS_WITH(ops::single_decode_problem_from_json(bad), Catch::Contains("problem.head_dims is not"));
  bad = j;
  bad["kv_len"] = "long";
  CHECK_THROWS_WITH(ops::single_decode_problem_from_json(bad), Catch::Contains("problem.kv_len=\"long\""));
}

TEST_CASE("a split plan names its workspace regions; an unsplit one needs none", "[contract][planner]") {
  SingleDecodeProblem p = test::d128_decode_problem(32, 8, 32768);
  const auto split = ops::plan_single_decode(p, {132});
  REQUIRE(split.num_splits > 1);
  REQUIRE(split.merge.has_value());
  CHECK(split.workspace.region("partial_o").bytes == size_t(split.num_splits) * 32 * 128 * 4);
  CHECK(split.workspace.region("partial_lse").bytes == size_t(split.num_splits) * 32 * 4);
  // The splits cover the sequence exactly once.
  CHECK(int64_t(split.num_splits - 1) * split.chunk_size < p.kv_len);
  CHECK(int64_t(split.num_splits) * split.chunk_size >= p.kv_len);
  p.kv_len = 100;
  const auto one = ops::plan_single_decode(p, {132});
  CHECK(one.num_splits == 1);
  CHECK(one.workspace.float_bytes() == 0);
  CHECK_FALSE(one.merge.has_value());
}

TEST_CASE("single decode warms its chunks' first rows in L2 only where the rows are 16-byte aligned",
          "[contract][planner]") {
  SingleDecodeProblem p = test::d128_decode_problem(32, 8, 32768);
  for (DType kv : {DType::BF16, DType::E4M3}) {
    p.kv_dtype = kv;
    const auto L = ops::plan_single_decode(p, {132});
    CHECK(L.prefetch_rows == 128);  // 256 CTAs x 128 rows: 16 MiB of bf16 K/V, 8 MiB of fp8
    CHECK(L.to_json().at("prefetch_rows") == 128);
  }
  p.kv_len = 60;  // one chunk, shorter than the rows: the chunk (the kernel stops at the length)
  const auto short_plan = ops::plan_single_decode(p, {132});
  CHECK(short_plan.num_splits == 1);
  CHECK(short_plan.prefetch_rows == short_plan.chunk_size);
  // MHA with fp8 K/V runs on CUDA cores, whose 8-byte loads let run() accept
  // rows that the bulk prefetch could not take: none are warmed.
  p.kv_len = 32768;
  p.num_kv_heads = 32;
  REQUIRE_FALSE(ops::plan_single_decode(p, {132}).decode.spec.as<DecodeKernel>()->tensor_cores);
  CHECK(ops::plan_single_decode(p, {132}).prefetch_rows == 0);
  // bf16 there loads 16 bytes too; the 16 MiB bound holds over more CTAs.
  p.kv_dtype = DType::BF16;
  const auto mha = ops::plan_single_decode(p, {132});
  CHECK(mha.prefetch_rows > 0);
  CHECK(int64_t(mha.prefetch_rows) * 2 * 128 * 2 * 32 * mha.num_splits <= (16 << 20));
}

TEST_CASE("the planner takes the tensor cores by itself from group 4, RoPE included", "[contract][planner]") {
  SingleDecodeProblem p = test::d128_decode_problem(32, 16, 4096);
  auto tc = [&] { return ops::plan_single_decode(p, {132}).decode.spec.as<DecodeKernel>()->tensor_cores; };
  CHECK_FALSE(tc());  // group 2: CUDA cores
  p.options.use_tensor_cores = true;
  CHECK(tc());  // asked for
  p.options.use_tensor_cores = false;
  p.num_kv_heads = 4;
  CHECK(tc());  // group 8: faster on tensor cores
  // RoPE keeps the rotated q/k exact there (kSplitQK), so accuracy no
  // longer rules the tensor cores out; the GPU grids check its lse.
  p.options.pos_encoding_mode = PosEncoding::RopeLlama;
  CHECK(tc());
  p.head_dim = 256;
  CHECK_FALSE(tc());  // the mma skeleton stops at 128
}

TEST_CASE("a one-token decode leaves the tensor cores where their kernel would not fit the device",
          "[contract][planner]") {
  SingleDecodeProblem p = test::d128_decode_problem(32, 4, 4096);
  ops::DeviceFigures ada{128, 99 * 1024};  // sm_89: 99 KB per block
  auto plan = [&] { return *ops::plan_single_decode(p, ada).decode.spec.as<DecodeKernel>(); };
  CHECK(plan().tensor_cores);  // 74 KB fits
  CHECK(plan().dynamic_smem_bytes() <= ada.smem_per_block);
  p.options.pos_encoding_mode = PosEncoding::RopeLlama;
  p.options.use_tensor_cores = true;
  CHECK_FALSE(plan().tensor_cores);  // RoPE's split q/k needs 113 KB: CUDA cores, even when asked
  CHECK(ops::plan_single_decode(p, {132}).decode.spec.as<DecodeKernel>()->tensor_cores);  // H100: fits
  // Batch decode alike; several tokens per request have only the tensor cores.
  BatchDecodeProblem b;
  b.batch_size = 2;
  b.num_qo_heads = 32;
  b.num_kv_heads = 4;
  b.head_dim = 128;
  b.page_size = 16;
  b.q_dtype = b.kv_dtype = b.o_dtype = DType::BF16;
  b.options.pos_encoding_mode = PosEncoding::RopeLlama;
  CHECK_FALSE(ops::plan_batch_decode(b, ada).decode.spec.as<DecodeKernel>()->tensor_cores);
  CHECK(ops::plan_batch_decode(b, {132}).decode.spec.as<DecodeKernel>()->tensor_cores);
}

TEST_CASE("the registry's operators explain plans and list kernels from JSON alone", "[contract][registry]") {
  for (const auto& op : ops::operators()) {
    INFO(op.name);
    const auto problem = op.bench_problems().front();
    const auto plan = op.explain(problem, {132});
    CHECK(plan.at("kernels").size() >= 1);
    for (const auto& k : plan.at("kernels")) CHECK_NOTHROW(KernelSpec::from_json(k.at("spec")));
    CHECK_FALSE(op.kernels_for(problem).empty());
    CHECK_FALSE(op.model_problems({32, 8, 128, 0.f}).empty());
  }
}

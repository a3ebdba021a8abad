#include "ops/single_decode/single_decode_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnjit/error.hpp"
#include "ops/attention_options/decode_options.hpp"
#include "ops/decode_choice.hpp"
#include "ops/split_states.hpp"
#include "ops/single_decode/single_decode_problem.hpp"

namespace attnjit::ops {

namespace {

DecodeKernel decode_spec(const SingleDecodeProblem& problem, const DeviceFigures& device) {
  return choose_decode_kernel(decode_shape(problem, problem.q_dtype, device), KVSourceKind::Contiguous);
}

}  // namespace

std::vector<KernelSpec> single_decode_kernels(const SingleDecodeProblem& problem) {
  validate(problem);
  return {decode_spec(problem, DeviceFigures{}), split_merge_kernel(problem.head_dim, problem.q_dtype)};
}

SingleDecodeLayout plan_single_decode(const SingleDecodeProblem& problem, const DeviceFigures& device) {
  validate(problem);
  SingleDecodeLayout layout;
  const DecodeKernel decode = decode_spec(problem, device);
  const auto& o = problem.options;

  const int kv_len = static_cast<int>(problem.kv_len);
  layout.kv_begin = o.window_left >= 0 ? std::max(0, kv_len - 1 - o.window_left) : 0;
  const int rows = kv_len - layout.kv_begin;

  const int group = problem.num_qo_heads / problem.num_kv_heads;
  const DecodeTile tile = decode_tile(decode);
  const int rows_per_iter = tile.rows_per_iter;
  const int ctas_per_split = problem.num_kv_heads * (group / decode.heads_per_cta);
  // Fill exactly one wave of resident CTAs, rounding the split count down: a
  // second, nearly empty wave (e.g. 544 CTAs on 528 slots) costs almost as
  // much as the first, while one wave short by a few slots costs a few percent.
  const int wave = device.sm_count * tile.ctas_per_sm;
  const int max_splits_by_rows = std::max(1, rows / std::max(kMinRowsPerSplit, rows_per_iter));
  int splits = std::clamp(wave / ctas_per_split, 1, max_splits_by_rows);
  int chunk = (rows + splits - 1) / splits;
  chunk = (chunk + rows_per_iter - 1) / rows_per_iter * rows_per_iter;
  splits = (rows + chunk - 1) / chunk;
  layout.num_splits = splits;
  layout.chunk_size = chunk;
  layout.prefetch_rows =
      decode_warmed_rows(decode, chunk, problem.num_kv_heads * splits);  // every CTA is of the one wave

  // Head subgroups fastest, so sibling CTAs of one split run together; then
  // KV heads, then splits (kernels/decode_work.cuh).
  layout.decode.role = "decode";
  layout.decode.spec = decode;
  layout.decode.shape.grid[0] = group / decode.heads_per_cta;
  layout.decode.shape.grid[1] = problem.num_kv_heads;
  layout.decode.shape.grid[2] = splits;
  layout.decode.shape.threads = decode.threads();
  layout.decode.shape.smem_bytes = decode.dynamic_smem_bytes();

  if (splits > 1) {
    layout.merge = merge_launch(problem.head_dim, problem.q_dtype, problem.num_qo_heads);  // one CTA per output row
    add_split_states(layout.workspace, splits, problem.num_qo_heads, problem.head_dim);
  }
  set_decode_scales(layout, o, problem.head_dim);
  return layout;
}

nlohmann::json SingleDecodeLayout::to_json() const {
  return {{"kernels", kernels_json(decode, merge)},
          {"num_splits", num_splits},
          {"chunk_size", chunk_size},
          {"kv_begin", kv_begin},
          {"prefetch_rows", prefetch_rows},
          {"workspace", workspace.to_json()}};
}

}  // namespace attnjit::ops

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

DecodeKernel decode_spec(const SingleDecodeProblem& p, const DeviceFigures& device) {
  return choose_decode_kernel(decode_shape(p, p.q_dtype, device), KVSourceKind::Contiguous);
}

}  // namespace

std::vector<KernelSpec> single_decode_kernels(const SingleDecodeProblem& p) {
  validate(p);
  return {decode_spec(p, DeviceFigures{}), split_merge_kernel(p.head_dim, p.q_dtype)};
}

SingleDecodeLayout plan_single_decode(const SingleDecodeProblem& p, const DeviceFigures& device) {
  validate(p);
  SingleDecodeLayout L;
  const DecodeKernel decode = decode_spec(p, device);
  const auto& o = p.options;

  const int kv_len = static_cast<int>(p.kv_len);
  L.kv_begin = o.window_left >= 0 ? std::max(0, kv_len - 1 - o.window_left) : 0;
  const int rows = kv_len - L.kv_begin;

  const int group = p.num_qo_heads / p.num_kv_heads;
  const DecodeTile tile = decode_tile(decode);
  const int rows_per_iter = tile.rows_per_iter;
  const int ctas_per_split = p.num_kv_heads * (group / decode.heads_per_cta);
  // Fill exactly one wave of resident CTAs, rounding the split count down: a
  // second, nearly empty wave (e.g. 544 CTAs on 528 slots) costs almost as
  // much as the first, while one wave short by a few slots costs a few percent.
  const int wave = device.sm_count * tile.ctas_per_sm;
  const int max_splits_by_rows = std::max(1, rows / std::max(kMinRowsPerSplit, rows_per_iter));
  int splits = std::clamp(wave / ctas_per_split, 1, max_splits_by_rows);
  int chunk = (rows + splits - 1) / splits;
  chunk = (chunk + rows_per_iter - 1) / rows_per_iter * rows_per_iter;
  splits = (rows + chunk - 1) / chunk;
  L.num_splits = splits;
  L.chunk_size = chunk;
  L.prefetch_rows = decode_warmed_rows(decode, chunk, p.num_kv_heads * splits);  // every CTA is of the one wave

  // Head subgroups fastest, so sibling CTAs of one split run together; then
  // KV heads, then splits (kernels/decode_work.cuh).
  L.decode.role = "decode";
  L.decode.spec = decode;
  L.decode.shape.grid[0] = group / decode.heads_per_cta;
  L.decode.shape.grid[1] = p.num_kv_heads;
  L.decode.shape.grid[2] = splits;
  L.decode.shape.threads = decode.threads();
  L.decode.shape.smem_bytes = decode.dynamic_smem_bytes();

  if (splits > 1) {
    L.merge = merge_launch(p.head_dim, p.q_dtype, p.num_qo_heads);  // one CTA per output row
    add_split_states(L.workspace, splits, p.num_qo_heads, p.head_dim);
  }
  set_decode_scales(L, o, p.head_dim);
  return L;
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

#include "ops/single_decode/single_decode_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnjit/error.hpp"
#include "ops/attention_options/user_variant_options.hpp"
#include "ops/decode_choice.hpp"
#include "ops/single_decode/single_decode_problem.hpp"

namespace attnjit::ops {

namespace {

DecodeKernel decode_spec(const SingleDecodeProblem& p, const DeviceFigures& device) {
  DecodeShape shape;
  shape.smem_per_block = device.smem_per_block;
  shape.num_qo_heads = p.num_qo_heads;
  shape.num_kv_heads = p.num_kv_heads;
  shape.head_dim = p.head_dim;
  shape.q_dtype = p.q_dtype;
  shape.kv_dtype = p.kv_dtype;
  shape.o_dtype = p.q_dtype;
  shape.pos_encoding = p.options.pos_encoding_mode;
  shape.soft_cap = p.options.logits_soft_cap.value_or(0.f) > 0.f;
  shape.use_tensor_cores = p.options.use_tensor_cores;
  shape.user = user_source(p.options.variant);
  return choose_decode_kernel(shape, KVSourceKind::Contiguous);
}

MergeKernel merge_spec(const SingleDecodeProblem& p) {
  MergeKernel s;
  s.head_dim = p.head_dim;
  s.o_dtype = p.q_dtype;
  s.warps = 4;
  return s;
}

}  // namespace

std::vector<KernelSpec> single_decode_kernels(const SingleDecodeProblem& p) {
  validate(p);
  return {decode_spec(p, DeviceFigures{}), merge_spec(p)};
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
    const MergeKernel merge = merge_spec(p);
    KernelLaunch m{"merge", merge, {}};
    m.shape.threads = merge.threads();
    m.shape.grid[0] = p.num_qo_heads;  // one CTA per output row
    L.merge = m;
    L.workspace.add_float("partial_o", size_t(splits) * p.num_qo_heads * p.head_dim * sizeof(float));
    L.workspace.add_float("partial_lse", size_t(splits) * p.num_qo_heads * sizeof(float));
  }

  const float q_scale = o.q_scale.value_or(1.f), k_scale = o.k_scale.value_or(1.f);
  L.sm_scale = o.sm_scale.value_or(1.f / std::sqrt(float(p.head_dim))) * q_scale * k_scale;
  L.v_scale = o.v_scale.value_or(1.f);
  L.soft_cap = o.logits_soft_cap.value_or(0.f);
  L.rope_rcp_scale = 1.f / o.rope_scale.value_or(1.f);
  L.rope_log2_theta = std::log2(o.rope_theta.value_or(1e4f));
  return L;
}

nlohmann::json SingleDecodeLayout::to_json() const {
  nlohmann::json kernels = nlohmann::json::array({launch_json(decode)});
  if (merge) kernels.push_back(launch_json(*merge));
  return {{"kernels", kernels},
          {"num_splits", num_splits},
          {"chunk_size", chunk_size},
          {"kv_begin", kv_begin},
          {"prefetch_rows", prefetch_rows},
          {"workspace", workspace.to_json()}};
}

}  // namespace attnjit::ops

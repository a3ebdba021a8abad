#include "ops/single_decode/single_decode_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnjit/error.hpp"
#include "ops/single_decode/single_decode_problem.hpp"

namespace attnjit::ops {

namespace {

constexpr int kMaxHeadsPerCta = 8;      // CUDA cores: q/o fragments per thread grow with it (registers)
constexpr int kTensorCoreMinGroup = 4;  // from here on the mma skeleton is faster without being asked
constexpr int kMinRowsPerSplit = 128;  // below this a split's fixed cost (q load, merge) dominates

// Query heads per CTA. Up to 4 share one CTA's registers comfortably; a larger
// group is split across sibling CTAs that the grid launches back to back, so
// the second reads the same K/V rows from L2, not memory. A prime group above
// 4 (5, 7) would otherwise fall to 1 head per CTA, so it stays whole.
int heads_per_cta(int group) {
  for (int h = std::min(group, 4); h > 1; --h)
    if (group % h == 0) return h;
  return group <= kMaxHeadsPerCta ? group : 1;
}

// Tile shape by heads per CTA, with the resident CTAs per SM it gets (from
// the compiler's register counts for 4 warps, as data: the planner never
// needs a compiled kernel). All loads of the next iteration are in flight
// while one computes, so registers grow with unroll * 2 raw fragments.
struct DecodeTile {
  int unroll;
  int ctas_per_sm;
  int rows_per_iter(int head_dim, int warps) const { return unroll == 0 ? 16 * warps : warps * (256 / head_dim) * unroll; }
};
DecodeTile decode_tile(const DecodeKernel& s) {
  if (s.tensor_cores) return {0, 2};  // 16 rows per warp per tile; ~215 registers
  if (s.heads_per_cta <= 2) return {4, 4};  // <= 128 registers
  if (s.heads_per_cta <= 4) return {2, 3};  // ~150 registers
  return {1, 2};                            // 5-8 heads: ~220 registers
}

// The tensor-core skeleton takes the whole group as its 16-row M dimension
// (a larger group splits into sibling CTAs of at most 16 heads).
int tensor_core_heads_per_cta(int group) {
  for (int h = std::min(group, 16); h > 1; --h)
    if (group % h == 0) return h;
  return 1;
}

DecodeKernel decode_spec(const SingleDecodeProblem& p) {
  DecodeKernel s;
  s.head_dim = p.head_dim;
  s.variant.q_dtype = p.q_dtype;
  s.variant.kv_dtype = p.kv_dtype;
  s.variant.o_dtype = p.q_dtype;
  s.variant.pos_encoding = p.options.pos_encoding_mode;
  s.variant.soft_cap = p.options.logits_soft_cap.value_or(0.f) > 0.f;
  const int group = p.num_qo_heads / p.num_kv_heads;
  // The mma skeleton covers head_dim 64 and 128 (256-wide heads' O fragments
  // would not fit in registers). use_tensor_cores asks for it; without it the
  // planner still takes it from a group of kTensorCoreMinGroup up, where it
  // measured faster (docs/PERFORMANCE.md: 0.68x vs 0.57x copy at group 4,
  // 0.66x vs 0.37x at group 8, kv_len 32768) -- but never by itself with RoPE:
  // that skeleton rounds the rotated K to the q dtype before the MMA, which
  // costs up to 3e-2 (base 2) of lse in bf16, against 1e-4 on CUDA cores. The
  // choice is by accuracy first, then speed.
  const bool rope = p.options.pos_encoding_mode == PosEncoding::RopeLlama;
  s.tensor_cores = p.head_dim <= 128 && (p.options.use_tensor_cores || (group >= kTensorCoreMinGroup && !rope));
  s.heads_per_cta = s.tensor_cores ? tensor_core_heads_per_cta(group) : heads_per_cta(group);
  s.warps = 4;
  s.unroll = s.tensor_cores ? 4 : decode_tile(s).unroll;
  return s;
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
  return {decode_spec(p), merge_spec(p)};
}

SingleDecodeLayout plan_single_decode(const SingleDecodeProblem& p, const DeviceFigures& device) {
  validate(p);
  SingleDecodeLayout L;
  const DecodeKernel decode = decode_spec(p);
  const auto& o = p.options;

  const int kv_len = static_cast<int>(p.kv_len);
  L.kv_begin = o.window_left >= 0 ? std::max(0, kv_len - 1 - o.window_left) : 0;
  const int rows = kv_len - L.kv_begin;

  const int group = p.num_qo_heads / p.num_kv_heads;
  const DecodeTile tile = decode_tile(decode);
  const int rows_per_iter = tile.rows_per_iter(p.head_dim, decode.warps);
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

  // Head subgroups fastest, so sibling CTAs of one split run together.
  L.decode.role = "decode";
  L.decode.spec = decode;
  L.decode.shape.grid[0] = group / decode.heads_per_cta;
  L.decode.shape.grid[1] = splits;
  L.decode.shape.grid[2] = p.num_kv_heads;
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

namespace {

nlohmann::json launch_json(const KernelLaunch& k) {
  return {{"role", k.role},
          {"kernel", k.spec.name()},
          {"spec", k.spec.to_json()},
          {"grid", {k.shape.grid[0], k.shape.grid[1], k.shape.grid[2]}},
          {"threads", k.shape.threads},
          {"smem_bytes", k.shape.smem_bytes}};
}

}  // namespace

nlohmann::json SingleDecodeLayout::to_json() const {
  nlohmann::json kernels = nlohmann::json::array({launch_json(decode)});
  if (merge) kernels.push_back(launch_json(*merge));
  return {{"kernels", kernels},
          {"num_splits", num_splits},
          {"chunk_size", chunk_size},
          {"kv_begin", kv_begin},
          {"workspace", workspace.to_json()}};
}

}  // namespace attnjit::ops

#include "planner/single_decode_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnjit/error.hpp"

namespace attnjit::planner {

namespace {

constexpr int kMaxHeadsPerCta = 8;      // CUDA cores: q/o fragments per thread grow with it (registers)
constexpr int kTensorCoreMinGroup = 4;  // from here on the mma skeleton is faster without being asked
constexpr int kMinRowsPerSplit = 128;  // below this a split's fixed cost (q load, merge) dominates

[[noreturn]] void invalid(const std::string& msg) { throw Error(Status::InvalidArgument, msg); }

void check_positive_finite(const std::optional<float>& v, const char* name) {
  if (v && !(std::isfinite(*v) && *v > 0.f))
    invalid(fmt::format("{}={} is not allowed; it must be a finite number > 0", name, *v));
}

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
DecodeTile decode_tile(const KernelSpec& s) {
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

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

KernelSpec decode_spec(const SingleDecodeProblem& p) {
  KernelSpec s;
  s.op = KernelOp::SingleDecode;
  s.head_dim = p.head_dim;
  s.q_dtype = p.q_dtype;
  s.kv_dtype = p.kv_dtype;
  s.o_dtype = p.q_dtype;
  s.pos_encoding = p.options.pos_encoding_mode;
  s.soft_cap = p.options.logits_soft_cap.value_or(0.f) > 0.f;
  const int group = p.num_qo_heads / p.num_kv_heads;
  // The mma skeleton covers head_dim 64 and 128 (256-wide heads' O fragments
  // would not fit in registers). use_tensor_cores asks for it; without it the
  // planner still takes it from a group of kTensorCoreMinGroup up, where it
  // measured faster (docs/PERFORMANCE.md: 0.68x vs 0.57x copy at group 4,
  // 0.66x vs 0.37x at group 8, kv_len 32768).
  s.tensor_cores = p.head_dim <= 128 && (p.options.use_tensor_cores || group >= kTensorCoreMinGroup);
  s.heads_per_cta = s.tensor_cores ? tensor_core_heads_per_cta(group) : heads_per_cta(group);
  s.warps = 4;
  s.unroll = s.tensor_cores ? 4 : decode_tile(s).unroll;
  return s;
}

KernelSpec merge_spec(const SingleDecodeProblem& p) {
  KernelSpec s;
  s.op = KernelOp::MergeStates;
  s.head_dim = p.head_dim;
  s.o_dtype = p.q_dtype;
  s.warps = 4;
  return s;
}

}  // namespace

void validate(const SingleDecodeProblem& p) {
  if (p.num_qo_heads <= 0) invalid(fmt::format("num_qo_heads={} must be > 0", p.num_qo_heads));
  if (p.num_kv_heads <= 0) invalid(fmt::format("num_kv_heads={} must be > 0", p.num_kv_heads));
  if (p.num_qo_heads % p.num_kv_heads != 0)
    invalid(fmt::format("num_qo_heads={} must be a multiple of num_kv_heads={} (grouped-query attention)",
                        p.num_qo_heads, p.num_kv_heads));
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    throw Error(Status::Unsupported, fmt::format("head_dim={} is not supported; supported: 64, 128, 256", p.head_dim));
  if (p.kv_len < 1 || p.kv_len > std::numeric_limits<int32_t>::max() / 2)
    invalid(fmt::format("kv_len={} is not allowed; it must be in [1, {}]", p.kv_len,
                        std::numeric_limits<int32_t>::max() / 2));
  if (p.q_dtype != DType::F16 && p.q_dtype != DType::BF16)
    invalid(fmt::format("q.dtype={} is not supported; allowed: float16, bfloat16", to_string(p.q_dtype)));
  const bool kv16 = p.kv_dtype == DType::F16 || p.kv_dtype == DType::BF16;
  const bool kv8 = p.kv_dtype == DType::E4M3 || p.kv_dtype == DType::E5M2;
  if (!kv16 && !kv8)
    invalid(fmt::format("k.dtype={} is not supported; allowed: float16, bfloat16, float8_e4m3fn, float8_e5m2",
                        to_string(p.kv_dtype)));
  if (kv16 && p.kv_dtype != p.q_dtype)
    invalid(fmt::format("k.dtype={} must equal q.dtype={} for 16-bit KV (fp8 KV may pair with either)",
                        to_string(p.kv_dtype), to_string(p.q_dtype)));
  if (p.device < 0) invalid(fmt::format("device={} must be >= 0", p.device));
  const auto& o = p.options;
  if (o.window_left < -1) invalid(fmt::format("window_left={} is not allowed; use -1 (no window) or >= 0", o.window_left));
  check_positive_finite(o.q_scale, "q_scale");
  check_positive_finite(o.k_scale, "k_scale");
  check_positive_finite(o.v_scale, "v_scale");
  check_positive_finite(o.sm_scale, "sm_scale");
  check_positive_finite(o.rope_scale, "rope_scale");
  check_positive_finite(o.rope_theta, "rope_theta");
  if (o.logits_soft_cap && !(std::isfinite(*o.logits_soft_cap) && *o.logits_soft_cap >= 0.f))
    invalid(fmt::format("logits_soft_cap={} is not allowed; it must be >= 0 (0: no capping)", *o.logits_soft_cap));
}

std::vector<KernelSpec> kernels_for(const SingleDecodeProblem& p) {
  validate(p);
  return {decode_spec(p), merge_spec(p)};
}

SingleDecodeLayout plan_single_decode(const SingleDecodeProblem& p, const DeviceFigures& device) {
  validate(p);
  SingleDecodeLayout L;
  L.decode = decode_spec(p);
  const auto& o = p.options;

  const int kv_len = static_cast<int>(p.kv_len);
  L.kv_begin = o.window_left >= 0 ? std::max(0, kv_len - 1 - o.window_left) : 0;
  const int rows = kv_len - L.kv_begin;

  const int group = p.num_qo_heads / p.num_kv_heads;
  const DecodeTile tile = decode_tile(L.decode);
  const int rows_per_iter = tile.rows_per_iter(p.head_dim, L.decode.warps);
  const int ctas_per_split = p.num_kv_heads * (group / L.decode.heads_per_cta);
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
  L.decode_shape.grid[0] = group / L.decode.heads_per_cta;
  L.decode_shape.grid[1] = splits;
  L.decode_shape.grid[2] = p.num_kv_heads;
  L.decode_shape.threads = L.decode.threads();
  L.decode_shape.smem_bytes = L.decode.dynamic_smem_bytes();

  if (splits > 1) {
    L.merge = merge_spec(p);
    L.merge_shape.threads = L.merge->threads();
    L.merge_shape.grid[0] = p.num_qo_heads;  // one CTA per output row
    L.partial_o_offset = 0;
    L.partial_lse_offset = align256(size_t(splits) * p.num_qo_heads * p.head_dim * sizeof(float));
    L.workspace_bytes = L.partial_lse_offset + align256(size_t(splits) * p.num_qo_heads * sizeof(float));
  }

  const float q_scale = o.q_scale.value_or(1.f), k_scale = o.k_scale.value_or(1.f);
  L.sm_scale = o.sm_scale.value_or(1.f / std::sqrt(float(p.head_dim))) * q_scale * k_scale;
  L.v_scale = o.v_scale.value_or(1.f);
  L.soft_cap = o.logits_soft_cap.value_or(0.f);
  L.rope_rcp_scale = 1.f / o.rope_scale.value_or(1.f);
  L.rope_log2_theta = std::log2(o.rope_theta.value_or(1e4f));
  return L;
}

}  // namespace attnjit::planner

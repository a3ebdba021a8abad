#include "ops/decode_choice.hpp"

#include <algorithm>

#include "decode_params.h"
#include "ops/attention_options/user_variant_options.hpp"

namespace attnjit::ops {

namespace {

constexpr int kMaxHeadsPerCta = 8;      // CUDA cores: q/o fragments per thread grow with it (registers)
constexpr int kMaxRows512 = 4;          // CUDA cores at head_dim 512: a row holds twice the registers
constexpr int kTensorCoreMinGroup = 4;  // from here on the mma skeleton is faster without being asked

// Query heads per CTA. Up to 4 share one CTA's registers comfortably; a larger
// group is split across sibling CTAs that the grid launches back to back, so
// the second reads the same K/V rows from L2, not memory. A prime group above
// 4 (5, 7) would otherwise fall to 1 head per CTA, so it stays whole.
int heads_per_cta(int group) {
  for (int h = std::min(group, 4); h > 1; --h)
    if (group % h == 0) return h;
  return group <= kMaxHeadsPerCta ? group : 1;
}

// The tensor-core skeleton's up to 16 query rows (the N of its key-major
// MMAs, 8 per n-tile) hold heads x tokens of one request
// (kernels/decode_queries.cuh). A shape that does not fit splits into sibling
// CTAs (head blocks x token tiles), which read the same K/V rows back to
// back, the later ones from L2. Chosen: the fewest CTAs per KV head, then
// the fewest rows computed (padding), then more heads per CTA. With one token
// this is the largest divisor of the group up to 16.
struct QueryTile {
  int heads, tokens;
};
QueryTile tensor_core_query_tile(int group, int q_len) {
  QueryTile best{1, 1};
  long best_ctas = -1, best_rows = 0;
  for (int h = std::min(group, 16); h >= 1; --h) {
    if (group % h != 0) continue;
    const int max_tokens = std::min(q_len, 16 / h);
    const int tiles = (q_len + max_tokens - 1) / max_tokens;
    const int tokens = (q_len + tiles - 1) / tiles;  // balanced: 5 tokens by 4 are tiles of 3 and 2, not 4 and 1
    const long ctas = long(group / h) * tiles, rows = ctas * h * tokens;
    if (best_ctas < 0 || ctas < best_ctas || (ctas == best_ctas && rows < best_rows)) {
      best = {h, tokens};
      best_ctas = ctas;
      best_rows = rows;
    }
  }
  return best;
}

// The CUDA-core skeleton's rows: heads_per_cta(group) heads (at most 4 at
// head_dim 512), and for several query tokens as many tokens as keep the rows
// at kMaxHeadsPerCta (kMaxRows512), balanced across the token tiles.
QueryTile cuda_core_query_tile(int group, int q_len, int head_dim) {
  const int max_rows = head_dim > 256 ? kMaxRows512 : kMaxHeadsPerCta;
  int heads = heads_per_cta(group);
  if (heads > max_rows)
    for (heads = max_rows; group % heads != 0;) --heads;
  const int max_tokens = std::max(1, std::min(q_len, max_rows / heads));
  const int tiles = (q_len + max_tokens - 1) / max_tokens;
  return {heads, (q_len + tiles - 1) / tiles};
}

}  // namespace

DecodeKernel choose_decode_kernel(const DecodeShape& p, KVSourceKind source) {
  DecodeKernel s;
  s.head_dim = p.head_dim;
  s.variant.q_dtype = p.q_dtype;
  s.variant.kv_dtype = p.kv_dtype;
  s.variant.o_dtype = p.o_dtype;
  s.variant.pos_encoding = p.pos_encoding;
  s.variant.soft_cap = p.soft_cap;
  s.kv_source = source;
  const int group = p.num_qo_heads / p.num_kv_heads;
  // The mma skeleton covers head_dim 64 and 128 (256-wide heads' O fragments
  // would not fit in registers). use_tensor_cores asks for it; without it the
  // planner still takes it from a group of kTensorCoreMinGroup up, where it is
  // the faster skeleton (docs/PERFORMANCE.md), RoPE included: the skeleton keeps
  // the rotated q and k as a rounded part and the rest (decode_mma.cuh:
  // kSplitQK), so its lse matches the CUDA cores'.
  // Several query tokens per request take the tensor cores where they run
  // (head_dim <= 128), and CUDA cores above, tokens x heads rows a CTA.
  const bool multi_token = p.q_len > 1;
  s.warps = 4;
  s.tensor_cores = p.head_dim <= 128 && (p.use_tensor_cores || multi_token || group >= kTensorCoreMinGroup);
  // Several tokens on tensor cores: if their kernel does not fit, loading it
  // names the limit (Engine::load_on_device).
  if (s.tensor_cores && !multi_token && s.dynamic_smem_bytes() > p.smem_per_block) s.tensor_cores = false;
  const QueryTile tile = s.tensor_cores ? tensor_core_query_tile(group, std::max(p.q_len, 1))
                                        : cuda_core_query_tile(group, std::max(p.q_len, 1), p.head_dim);
  s.heads_per_cta = tile.heads;
  s.tokens_per_cta = tile.tokens;
  if (multi_token) s.variant.mask = p.draft_mask ? MaskMode::Draft : MaskMode::Causal;
  apply_user_variant(p.user, s);  // after the mask: a mask_mod replaces its test, not the keys visited
  s.unroll = s.tensor_cores ? 4 : decode_tile(s).rows_per_iter / (s.warps * decode_rows_per_warp_step(s.head_dim));
  return s;
}

int decode_query_blocks(const DecodeKernel& k, int group, int q_len) {
  const int token_tiles = (std::max(q_len, 1) + k.tokens_per_cta - 1) / k.tokens_per_cta;
  return group / k.heads_per_cta * token_tiles;
}

// Tile shape by heads per CTA, with the resident CTAs per SM it gets (from
// the compiler's register counts for 4 warps, as data: the planner never
// needs a compiled kernel). All loads of the next iteration are in flight
// while one computes, so registers grow with unroll * 2 raw fragments.
int decode_rows_per_warp_step(int head_dim) { return std::max(1, 256 / head_dim); }

DecodeTile decode_tile(const DecodeKernel& s) {
  const int warps = s.warps, rows_per_step = decode_rows_per_warp_step(s.head_dim);  // rows a warp covers per step
  // Tensor cores: 16 rows per warp per tile, 32 for fp8 KV (the same bytes;
  // kernels/decode_mma.cuh), at the CTAs per SM its launch bounds promise.
  if (s.tensor_cores)
    return {16 * warps * (2 / static_cast<int>(dtype_size(s.variant.kv_dtype))), kernels::kDecodeMmaCtasPerSm};
  int unroll, ctas;
  const int rows = s.heads_per_cta * s.tokens_per_cta;
  if (s.head_dim > 256) {  // 16 elements a lane: each row and load twice the registers (not measured)
    if (rows <= 2) unroll = 2, ctas = 2;
    else unroll = 1, ctas = 2;
  } else if (rows <= 2) unroll = 4, ctas = 4;  // <= 128 registers
  else if (rows <= 4) unroll = 2, ctas = 3;    // ~150 registers
  else unroll = 1, ctas = 2;                   // 5-8 rows: ~220 registers
  return {warps * rows_per_step * unroll, ctas};
}

int decode_kv_align_bytes(const DecodeKernel& k) {
  return k.tensor_cores ? 16 : 8 * static_cast<int>(dtype_size(k.variant.kv_dtype));
}

// The first 128 rows of a CTA's chunk (the best of the row counts tried for
// both K/V types), and at most 16 MiB in all, so they stay in L2 until the
// wait returns. The bulk prefetch takes 16-byte aligned rows, which run()
// guarantees only where the kernel's loads need them too (not CUDA-core fp8).
int decode_warmed_rows(const DecodeKernel& k, int chunk, int warming_ctas) {
  constexpr int64_t kRows = 128, kBytesInAll = 16 << 20;
  if (decode_kv_align_bytes(k) % 16 != 0) return 0;
  const int64_t row_bytes = 2 * int64_t(k.head_dim) * int64_t(dtype_size(k.variant.kv_dtype));
  const int64_t rows = std::min(kRows, kBytesInAll / (row_bytes * std::max(warming_ctas, 1)));
  return static_cast<int>(std::min<int64_t>(chunk, rows));
}

}  // namespace attnjit::ops

// A block-sparse user variant's tile classes (issue 31 item 2), shared by
// host and device code: written by the classification kernel
// (block_mask.cuh) before the runs that read them, read by the prefill
// skeletons' KV walk (kv_tile_walk.cuh).
//
// A row is one query tile of the plan (packed rows, as the skeleton tiles
// them), a slot one KV head (the mask reads h) or the only one (the caller
// promised it does not: heads_vary false). Per (row, slot): the count of
// KV tiles that keep any pair, and those tiles in ascending order, each as
// tile * 2 + 1 when every pair of it is kept (full) or tile * 2 (partial).
// Empty tiles are absent.
#pragma once
#include "fast_divmod.h"
#include "platform.cuh"
#include "variant_params.h"

namespace attnjit {
namespace kernels {

enum BlockClass : int32_t { kBlockEmpty = 0, kBlockFull = 1, kBlockPartial = 2 };

// What a block-sparse prefill kernel reads. It travels in the last
// kBlockTilesWords of VariantParams::user_params (a block-sparse variant's
// declaration may use the rest: Variant::kMaxParamsBytes less these), so no
// params struct grows and every other kernel compiles as before.
struct BlockTiles {
  const int32_t* tiles;       // [rows * slots * stride]
  const int32_t* counts;      // [rows * slots]
  const int32_t* row_indptr;  // a batch plan's: request b's first row; null: one request (row = query tile)
  int32_t stride;             // entries per (row, slot): the longest request's KV tiles
  int32_t slots;              // 1, or the KV heads
};
enum : int { kBlockTilesWords = sizeof(BlockTiles) / 8 };
static_assert(sizeof(BlockTiles) % 8 == 0, "whole words of user_params");
ATTNJIT_HOST_DEVICE inline const BlockTiles& block_tiles(const VariantParams& v) {
  return *reinterpret_cast<const BlockTiles*>(v.user_params + kUserParamsWords - kBlockTilesWords);
}
ATTNJIT_HOST_DEVICE inline BlockTiles& block_tiles(VariantParams& v) {
  return *reinterpret_cast<BlockTiles*>(v.user_params + kUserParamsWords - kBlockTilesWords);
}

// The classification kernel's parameters: one CTA per (row, slot).
struct BlockMaskParams {
  int32_t* tiles;
  int32_t* counts;
  // A batch plan's rows: per row {request, its query tile within the
  // request, qo_len, kv_len}; null for a single request (row = query tile).
  const int32_t* row_requests;
  int32_t stride;
  int32_t slots;
  int32_t qo_len, kv_len;     // the single request's
  int32_t tile_q, tile_kv;    // the prefill kernel's: packed query rows and keys per tile
  int32_t heads_vary;         // 0: mask_mod does not read h, so each token is evaluated once
  FastDivmod group;           // query heads per KV head (packed row r: token r / group, head r % group)
  uint64_t user_params[kUserParamsWords];  // the variant's Params, as the prefill kernel gets them
};

// The classification kernel's CTA: 32 warps, a KV tile per warp at a time
// (a 16k-token row has 128 tiles of 128 keys: 4 per warp). A CTA is one
// query tile: a single 16k-token request has 128, about one per SM, so
// the warps of one CTA are all an SM has to hide its loads' latency with
// (with 8, classifying a 16k document mask took about half as long as
// the attention it served).
enum : int { kBlockMaskThreads = 1024 };

// Int32 entries of a block mask's workspace region: counts, then tiles.
ATTNJIT_HOST_DEVICE constexpr int64_t block_mask_entries(int64_t rows, int64_t slots, int64_t kv_tiles) {
  return rows * slots * (1 + kv_tiles);
}

}  // namespace kernels
}  // namespace attnjit

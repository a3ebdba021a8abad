// Classification of a block-sparse user variant's tiles (issue 31 item 2):
// mask_mod evaluated on every (query row, key) pair of each (query tile, KV
// tile) of a prefill plan, into the classes the skeletons walk
// (block_mask_params.h). The generated code defines attnjit::user::Params
// and mask_mod before this header, as for the prefill kernel of the same
// variant, so both read the same snippet with the same params.
//
// A CTA takes one (row, slot): its warps classify the KV tiles 32 apiece
// (a warp per tile, lanes over the tile's keys, the tile's packed query rows
// in turn, leaving at the first row that shows both a kept and a dropped
// pair), then warp 0 appends the non-empty ones in order. Only real pairs
// count: packed rows past the request and keys past its KV are no pairs.
#pragma once
#include "block_mask_params.h"
#include "platform.cuh"
#include "user_hooks.cuh"

#if !defined(ATTNJIT_USER_MASK_MOD)
#error "block_mask.cuh classifies a user variant's mask_mod: the generated code defines it first"
#endif

namespace attnjit {

constexpr int kBlockMaskWarps = kernels::kBlockMaskThreads / 32;

// The class of KV tile `tile` for packed rows row0 .. row0 + rows of KV head kv_head.
ATTNJIT_DEVICE int classify_block(const kernels::BlockMaskParams& p, const user::Params& up, int row0, int rows,
                                  int kv_head, int tile, int lane) {
  const int k0 = tile * p.tile_kv, keys = min(p.tile_kv, p.kv_len - k0);
  bool kept = false, dropped = false;
  for (int r = 0; r < rows; ++r) {
    uint32_t token, in_group;
    p.group.divmod(uint32_t(row0 + r), token, in_group);
    const int head = kv_head * int(p.group.d) + int(in_group);
    for (int c = lane; c < keys; c += 32) {
      const bool keep = user::mask_mod(0, head, int(token), k0 + c, up);
      kept = kept || keep;
      dropped = dropped || !keep;
    }
    kept = __any_sync(~0u, kept);
    dropped = __any_sync(~0u, dropped);
    if (kept && dropped) return kernels::kBlockPartial;  // warp-uniform
  }
  return kept ? kernels::kBlockFull : kernels::kBlockEmpty;
}

ATTNJIT_DEVICE void block_mask_classify(const kernels::BlockMaskParams& p) {
  constexpr int kChunk = kBlockMaskWarps * 32;
  __shared__ int8_t classes[kChunk];
  const int row = blockIdx.x, slot = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int packed_len = p.qo_len * int(p.group.d);
  const int row0 = row * p.tile_q, rows = min(p.tile_q, packed_len - row0);
  const int num_tiles = p.kv_len > 0 ? (p.kv_len + p.tile_kv - 1) / p.tile_kv : 0;
  const user::Params& up = *reinterpret_cast<const user::Params*>(p.user_params);
  int32_t* out = p.tiles + (int64_t(row) * p.slots + slot) * p.stride;
  int written = 0;  // warp 0's
  for (int c0 = 0; c0 < num_tiles; c0 += kChunk) {
    for (int i = 0; i < 32; ++i) {
      const int t = c0 + warp * 32 + i;
      const int cls = t < num_tiles && rows > 0 ? classify_block(p, up, row0, rows, slot, t, lane)
                                                : int(kernels::kBlockEmpty);
      if (lane == 0) classes[warp * 32 + i] = int8_t(cls);
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
      for (int part = 0; part < kBlockMaskWarps; ++part) {
        const int cls = classes[part * 32 + lane], t = c0 + part * 32 + lane;
        const unsigned keep = __ballot_sync(~0u, cls != kernels::kBlockEmpty);
        if (cls != kernels::kBlockEmpty)
          out[written + __popc(keep & ((1u << lane) - 1))] = t * 2 + (cls == kernels::kBlockFull ? 1 : 0);
        written += __popc(keep);
      }
    }
    __syncthreads();  // the classes are rewritten by the next chunk
  }
  if (threadIdx.x == 0) p.counts[int64_t(row) * p.slots + slot] = written;
}

}  // namespace attnjit

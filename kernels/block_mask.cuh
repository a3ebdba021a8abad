// Classification of a block-sparse user variant's tiles (issue 31 item 2):
// mask_mod evaluated on every real (query, key) pair of each (query tile, KV
// tile) of a prefill plan, into the classes the skeletons walk
// (block_mask_params.h). The generated code defines attnjit::user::Params
// and mask_mod before this header, as for the prefill kernel of the same
// variant, so both read the same snippet with the same params.
//
// A CTA takes one (row, slot): its warps share the KV tiles, interleaved (a
// warp per tile, each warp's tiles spread over the row so short rows keep
// every warp busy), then warp 0 appends the non-empty ones in order. Only
// real pairs count: packed rows past the request and keys past its KV are
// no pairs. With heads_vary false the packed rows of one token differ only
// in h, which the mask promises not to read: each token is evaluated once.
#pragma once
#include "block_mask_params.h"
#include "platform.cuh"
#include "user_hooks.cuh"

#if !defined(ATTNJIT_USER_MASK_MOD)
#error "block_mask.cuh classifies a user variant's mask_mod: the generated code defines it first"
#endif

namespace attnjit {

constexpr int kBlockMaskWarps = kernels::kBlockMaskThreads / 32;

// The queries one (row, slot) evaluates: `count` packed rows from row0, or
// (by_token) `count` tokens from token0, each with the head of its first
// packed row in the tile.
struct BlockMaskQueries {
  int row0, token0, count, kv_head;
  bool by_token;
  FastDivmod group;
  ATTNJIT_DEVICE BlockMaskQueries(const kernels::BlockMaskParams& p, int row0_, int rows, int qo_len, int slot)
      : row0(row0_), kv_head(slot), by_token(!p.heads_vary), group(p.group) {
    token0 = int(group.div(uint32_t(row0)));
    count = by_token ? (rows > 0 ? min(qo_len, int(group.div(uint32_t(row0 + rows - 1))) + 1) - token0 : 0) : rows;
  }
  ATTNJIT_DEVICE void operator()(int i, int& token, int& head) const {
    if (by_token) {
      token = token0 + i;
      head = kv_head * int(group.d) + (i == 0 ? row0 - token0 * int(group.d) : 0);
      return;
    }
    uint32_t t, in_group;
    group.divmod(uint32_t(row0 + i), t, in_group);
    token = int(t);
    head = kv_head * int(group.d) + int(in_group);
  }
};

// Whether any lane of the warp holds kept and any holds dropped: one vote
// (every known arch is sm_80 or newer).
ATTNJIT_DEVICE bool warp_saw_both(bool kept, bool dropped) {
  return __reduce_or_sync(~0u, (kept ? 1u : 0u) | (dropped ? 2u : 0u)) == 3u;
}

// The class of KV tile `tile` (keys k0 .. k0 + keys) for request b's queries.
// Lanes cover (query, key) pairs: one query per pass with a key every 32
// lanes, or, for tiles of fewer than 32 keys (a short last tile), 32 / keys
// queries per pass. A pass that shows both a kept and a dropped pair ends it
// (partial); empty and full need every pair, by their definitions.
ATTNJIT_DEVICE int classify_block(const kernels::BlockMaskParams& p, const user::Params& up,
                                  const BlockMaskQueries& queries, int b, int kv_len, int tile, int lane) {
  const int k0 = tile * p.tile_kv, keys = min(p.tile_kv, kv_len - k0);
  const bool wide = keys >= 32;
  const int per_pass = wide ? 1 : 32 / keys;
  const int lane_query = wide ? 0 : lane / keys, lane_key = wide ? lane : lane % keys;
  bool kept = false, dropped = false;
  // Votes every kPassesPerVote passes: a vote per pass (one query of a wide
  // tile) put a warp-wide reduction between every few mask_mod calls and
  // kept their loads from being issued together.
  constexpr int kPassesPerVote = 4;
  for (int q0 = 0; q0 < queries.count; q0 += per_pass * kPassesPerVote) {
#pragma unroll
    for (int pass = 0; pass < kPassesPerVote; ++pass) {
      const int i = q0 + pass * per_pass + lane_query;
      if (lane_query < per_pass && i < queries.count) {
        int token, head;
        queries(i, token, head);
        for (int c = lane_key; c < keys; c += 32) {
          const bool keep = user::mask_mod(b, head, token, k0 + c, up);
          kept |= keep;
          dropped |= !keep;
        }
      }
    }
    if (warp_saw_both(kept, dropped)) return kernels::kBlockPartial;  // warp-uniform
  }
  return __any_sync(~0u, kept) ? kernels::kBlockFull : kernels::kBlockEmpty;
}

ATTNJIT_DEVICE void block_mask_classify(const kernels::BlockMaskParams& p) {
  constexpr int kChunk = kBlockMaskWarps * 32;
  __shared__ int8_t classes[kChunk];
  const int row = blockIdx.x, slot = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // The row's request and lengths: the single request's, or the batch plan's table.
  int b = 0, q_tile = row, qo_len = p.qo_len, kv_len = p.kv_len;
  if (p.row_requests) {
    const int32_t* r = p.row_requests + 4 * int64_t(row);
    b = r[0];
    q_tile = r[1];
    qo_len = r[2];
    kv_len = r[3];
  }
  const int packed_len = qo_len * int(p.group.d);
  const int row0 = q_tile * p.tile_q, rows = max(0, min(p.tile_q, packed_len - row0));
  const int num_tiles = kv_len > 0 ? (kv_len + p.tile_kv - 1) / p.tile_kv : 0;
  const BlockMaskQueries queries(p, row0, rows, qo_len, slot);
  const user::Params& up = *reinterpret_cast<const user::Params*>(p.user_params);
  int32_t* out = p.tiles + (int64_t(row) * p.slots + slot) * p.stride;
  int written = 0;  // warp 0's
  for (int c0 = 0; c0 < num_tiles; c0 += kChunk) {
    // Chunk entry j is tile c0 + j, classified by warp j % warps.
    for (int i = 0; i < 32; ++i) {
      const int j = i * kBlockMaskWarps + warp, t = c0 + j;
      if (t >= num_tiles) break;
      const int cls = queries.count > 0 ? classify_block(p, up, queries, b, kv_len, t, lane)
                                        : int(kernels::kBlockEmpty);
      if (lane == 0) classes[j] = int8_t(cls);
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
      for (int part = 0; part < kBlockMaskWarps; ++part) {
        const int j = part * 32 + lane, t = c0 + j;
        const int cls = t < num_tiles ? int(classes[j]) : int(kernels::kBlockEmpty);
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

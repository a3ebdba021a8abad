// The KV tiles a prefill item visits, in order: the skeletons' loop and
// their K/V prefetch walk it (tile i of count(), starting at key base(i)).
// Without a block mask, every tile of the item's extent; with a
// block-sparse user variant (user_hooks.cuh), only the tiles its classes
// keep (block_mask_params.h), and full(i) says mask_mod keeps every pair of
// tile i, so the skeleton applies only the sequence edge and the window there.
#pragma once
#include "block_mask_params.h"
#include "platform.cuh"
#include "prefill_params.h"
#include "prefill_schedule.cuh"
#include "user_hooks.cuh"

namespace attnjit {

template <int TileKV, bool Sparse = user_block_sparse()>
struct KVTileWalk {
  int tile0, num;
  // request and row: the item's request and its query tile within the
  // request; e: its extent.
  ATTNJIT_DEVICE KVTileWalk(const kernels::PrefillParams&, int /*request*/, int /*row*/, int /*kv_head*/,
                            const PrefillExtent& e)
      : tile0(e.tile0), num(e.num_tiles) {}
  ATTNJIT_DEVICE int count() const { return num; }
  ATTNJIT_DEVICE int base(int i) const { return tile0 + i * TileKV; }
  ATTNJIT_DEVICE bool full(int) const { return false; }
};

template <int TileKV>
struct KVTileWalk<TileKV, true> {
  const int32_t* list;  // the row's kept tiles within the extent
  int num;
  ATTNJIT_DEVICE KVTileWalk(const kernels::PrefillParams& p, int request, int row, int kv_head,
                            const PrefillExtent& e) {
    const kernels::BlockTiles& b = kernels::block_tiles(p.var);
    // A batch plan's classes number the batch's query tiles: request's first, then its own.
    const int64_t plan_row = b.row_indptr ? int64_t(b.row_indptr[request]) + row : row;
    const int64_t at = plan_row * b.slots + (b.slots > 1 ? kv_head : 0);
    const int32_t* all = b.tiles + at * b.stride;
    const int n = b.counts[at];
    // The extent (a KV chunk, a window) is tiles t0 .. t1 of the row's
    // ascending list, found by binary search, the same for every thread;
    // an end at the request's first or last tile needs none (each step is a
    // load waiting on the last, all before either role's first tile).
    const int t0 = e.tile0 / TileKV, t1 = t0 + e.num_tiles;
    const int lo = t0 == 0 ? 0 : lower_bound(all, n, 2 * t0);
    const int hi = t1 * TileKV >= e.kv_len ? n : lower_bound(all, n, 2 * t1);
    list = all + lo;
    num = hi - lo;
  }
  ATTNJIT_DEVICE int count() const { return num; }
  ATTNJIT_DEVICE int base(int i) const { return (list[i] >> 1) * TileKV; }
  ATTNJIT_DEVICE bool full(int i) const { return list[i] & 1; }

 private:
  static ATTNJIT_DEVICE int lower_bound(const int32_t* a, int n, int value) {
    int lo = 0, hi = n;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (a[mid] < value) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
};

}  // namespace attnjit

// A decode CTA's first rows, warmed in L2 before pdl_wait(). Launched with
// programmatic dependent launch, a decode kernel's CTAs become resident while
// the kernel before still finishes (its last CTAs, or a merge), and wait in
// pdl_wait(). The DRAM is mostly idle then: the last wave of the kernel
// before cannot keep it busy. A CTA that sends prefetches for the start of
// its chunk first finds those rows in L2 once the wait returns, so the call
// starts streaming at once instead of paying a DRAM latency after the wait,
// and part of its bytes arrive in time that was idle.
//
// The kernel before may still write what locates the rows (a length, a page
// table entry), so the addresses are the source's hints (kv_source.cuh):
// bounded to the cache, possibly stale, so a wrong one only wastes bytes.
// Prefetches are hints, not reads, so the rows themselves may be written
// by the kernel before too (a KV append): L2 receives those writes.
#pragma once
#include "decode_params.h"
#include "decode_work.cuh"
#include "kv_source.cuh"
#include "platform.cuh"

namespace attnjit {

template <class KVSource, int HeadDim>
ATTNJIT_DEVICE void warm_first_rows(const kernels::DecodeParams& p) {
  if constexpr (KVSource::kHints) {
    // One CTA per KV head and item warms (sibling head blocks read the same
    // rows), and only the first wave's items.
    if (p.prefetch_rows <= 0 || blockIdx.x != 0 || decode_item_index() >= p.prefetch_items) return;
    // The work list is plan()'s copy, ordered before the launch, never a
    // kernel's output; the request is bounded all the same, since the hint
    // indexes the lengths and tables with it.
    const kernels::DecodeWorkItem item = decode_work_item(p);
    if (item.request < 0) return;  // padding of a fixed grid
    const typename KVSource::Hint kv(p.kv, min(item.request, p.num_requests - 1));
    const DecodeWork work = resolve_work(item, p.var.window_left, kv.length(), max(p.q_len, 1));
    const int end = min(work.end, work.begin + p.prefetch_rows);
    constexpr uint32_t kRowBytes = HeadDim * KVSource::kBytes;
    for (int r = work.begin + int(threadIdx.x); r < end; r += int(blockDim.x)) {
      const KVRowAddress at = kv.row(decode_kv_head(), r);
      prefetch_l2(at.k, kRowBytes);
      prefetch_l2(at.v, kRowBytes);
    }
  }
}

// A decode skeleton's opening: warm the CTA's first rows while the kernel
// before finishes, wait for it (q, the cache and the work list may come from
// it), then read the CTA's work item.
template <class KVSource, int HeadDim>
ATTNJIT_DEVICE kernels::DecodeWorkItem decode_cta_start(const kernels::DecodeParams& p) {
  warm_first_rows<KVSource, HeadDim>(p);
  pdl_wait();
  return decode_work_item(p);
}

}  // namespace attnjit

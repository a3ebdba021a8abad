// A decode CTA's first rows, warmed in L2 before pdl_wait(). Launched with
// programmatic dependent launch, a decode kernel's CTAs become resident while
// the kernel before still finishes (its last CTAs, or a merge), and wait in
// pdl_wait(). The DRAM is mostly idle then: the last wave of the kernel
// before cannot keep it busy. A CTA that sends prefetches for the start of
// its chunk first finds those rows in L2 once the wait returns, so the call
// starts streaming at once instead of paying a DRAM latency after the wait,
// and part of its bytes arrive in time that was idle.
//
// Only sources whose addresses follow from the params (kv_source.cuh) can do
// this: a page table or a length may still be written by the kernel before,
// and an address built from it before the wait could be out of range.
// Prefetches are hints, not reads, so the rows themselves may be written
// by the kernel before (a KV append): L2 receives those writes too.
#pragma once
#include "decode_params.h"
#include "decode_work.cuh"
#include "kv_source.cuh"
#include "platform.cuh"

namespace attnjit {

template <class KVSource, int HeadDim>
ATTNJIT_DEVICE void warm_first_rows(const kernels::DecodeParams& p) {
  if constexpr (KVSource::kAddressesFromParams) {
    // One CTA per KV head and item warms: sibling head blocks read the same rows.
    if (p.prefetch_rows <= 0 || p.work != nullptr || blockIdx.x != 0) return;
    const kernels::DecodeWorkItem item = decode_work_item(p);  // the uniform partition: no list read
    const KVSource kv(p.kv, item.request);
    const DecodeWork work = resolve_work(item, p.var.window_left, kv.length(), max(p.q_len, 1));
    const int end = min(work.end, work.begin + p.prefetch_rows);
    constexpr uint32_t kRowBytes = HeadDim * KVSource::kBytes;
    const auto rows = kv.slice(decode_kv_head(), 0);
    for (int r = work.begin + int(threadIdx.x); r < end; r += int(blockDim.x)) {
      const KVRowAddress at = rows.row(r);
      prefetch_l2(at.k, kRowBytes);
      prefetch_l2(at.v, kRowBytes);
    }
  }
}

}  // namespace attnjit

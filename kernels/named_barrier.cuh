// Named CTA barriers (bar.sync / bar.arrive with an id and a thread count)
// for groups of warps that meet without the rest of the CTA, and register
// reallocation between warpgroups (setmaxnreg, sm_90a). Id 0 is
// __syncthreads(); the warp-specialized prefill numbers its own from 1
// (prefill_sm90_ws.cuh).
#pragma once
#include "platform.cuh"

namespace attnjit {

// Waits until `threads` threads (whole warps) have reached barrier `id`,
// this one's included. Not .aligned (bar.sync is): a warp may arrive
// diverged, e.g. from an mbarrier spin (compute-sanitizer synccheck).
ATTNJIT_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// Counts this warp towards barrier `id` without waiting.
ATTNJIT_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// The warpgroup's registers per thread from here on (a multiple of 8 in
// 24..256): a producer gives registers back, consumers take them.
template <int Regs>
ATTNJIT_DEVICE void warpgroup_release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
}
template <int Regs>
ATTNJIT_DEVICE void warpgroup_claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
}

}  // namespace attnjit

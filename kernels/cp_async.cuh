// Asynchronous global -> shared copies (cp.async, sm_80+): the loads of the
// next tiles are in flight while the current one computes, without passing
// through registers. Copies are issued per thread and grouped by commit();
// wait<N>() blocks until at most N of this thread's groups are still pending
// (a __syncthreads() after it makes every thread's copies visible).
#pragma once
#include "mma.cuh"

namespace attnjit {

// 16 bytes from src to dst; when !valid the 16 bytes are zero-filled and src
// is not read (it must still be a valid address expression, not dereferenced).
// dst is a shared-window address (mma.cuh: smem_addr).
ATTNJIT_DEVICE void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes));
}

ATTNJIT_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;"); }

template <int N>
ATTNJIT_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

}  // namespace attnjit

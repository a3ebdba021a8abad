// Warpgroup MMA (wgmma, sm_90a): four warps issue one m64nNk16 product
// together, the B operand (and optionally A) read straight from shared
// memory through 64-bit descriptors, the f32 accumulators spread over the
// 128 threads exactly as mma.sync's C fragments (mma.cuh): warp w of the
// group holds rows 16w + g and 16w + g + 8, n-tile j of the accumulator is
// frag_c j. So the fragment verbs (fragment_softmax.cuh) work on them as
// they are, and an A operand from registers is mma.sync's frag_a.
//
// The products run asynchronously: fence() before the first of a batch
// (registers it reads or accumulates into were written since), commit()
// after the last, wait<N>() until at most N committed batches are pending.
// Between issue and wait the accumulators belong to the tensor cores:
// hold() after the wait ties every later read of them to it (the compiler
// would otherwise move reads above the wait, which names no registers).
#pragma once
#include "mma.cuh"
#include "wgmma_ops.cuh"

namespace attnjit {

ATTNJIT_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
ATTNJIT_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
ATTNJIT_DEVICE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// wgmma reads shared memory through the async proxy; what this thread wrote
// there by ordinary stores or cp.async (the generic proxy) becomes visible
// to it after this fence (and, for other threads' products, a barrier).
ATTNJIT_DEVICE void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

template <int N>
ATTNJIT_DEVICE void wgmma_hold(frag_c (&d)[N]) {
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d[n].x[i])::"memory");
}

// A shared-memory matrix descriptor with 128-byte swizzling: start address,
// leading and stride byte offsets, all in 16-byte units (PTX ISA, "Matrix
// Descriptor Format"). The swizzle repeats every 1024 bytes from a
// 1024-aligned address, so the base offset field stays 0.
ATTNJIT_DEVICE uint64_t wgmma_desc_sw128(uint32_t addr, uint32_t leading_bytes, uint32_t stride_bytes) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(leading_bytes >> 4) << 16) | (uint64_t(stride_bytes >> 4) << 32) |
         (uint64_t(1) << 62);
}

// The descriptor `offset` bytes past `desc`'s start. The start is the low 14 bits as addr >> 4, and
// shared memory ends below 256 KB, so the sum never carries out of that field: a 32-bit add on the
// low word. A tile's descriptors are then its base's, worked out once, plus constants (the bit
// packing above, per descriptor, was most of the consumers' uniform-datapath instructions).
ATTNJIT_DEVICE uint64_t wgmma_desc_advance(uint64_t desc, uint32_t offset) {
  return (desc & 0xFFFFFFFF00000000ull) | uint32_t(uint32_t(desc) + (offset >> 4));
}

}  // namespace attnjit

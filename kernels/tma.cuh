// The Tensor Memory Accelerator (sm_90): one thread copies a box of a tensor
// described by a tensor map (built on the host, runtime/src/ops/tma_map.cpp)
// into shared memory, and the bytes count towards an mbarrier's expected
// transactions (mbarrier.cuh). The maps are kernel parameters
// (__grid_constant__), addressed generically.
#pragma once
#include "platform.cuh"
#include "tma_params.h"

namespace attnjit {

// The box at coordinates (c0 innermost, c1, c2) of `map` to dst (the map's
// swizzle applied), completing `bytes` of barrier `bar`'s transaction.
ATTNJIT_DEVICE void tma_load_3d(uint32_t dst, const kernels::TmaMap& map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// Pulls the map into the descriptor cache before the first copy needs it.
ATTNJIT_DEVICE void tma_prefetch_map(const kernels::TmaMap& map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map)) : "memory");
}

}  // namespace attnjit

// get_batch_indices_positions (FlashInfer's semantics, page_params.h): one
// thread per entry of the ragged append finds its request by a binary search
// of append_indptr, so every entry is written in one pass (no fill kernel
// before it) and nothing at or past nnz is touched whatever the indptr holds.
#pragma once
#include "page_params.h"

namespace attnjit {

ATTNJIT_DEVICE void batch_indices_positions(const kernels::BatchPositionsParams& p) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < p.nnz; j += stride) {
    // The first k with append_indptr[k] > j; the request is k - 1.
    int32_t lo = 0, hi = p.batch_size + 1;
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (p.append_indptr[mid] <= j) lo = mid + 1;
      else hi = mid;
    }
    const int32_t b = lo - 1;
    if (b < 0 || b >= p.batch_size) {
      p.batch_indices[j] = -1;  // before the first request or past the last
      continue;
    }
    p.batch_indices[j] = b;
    // In 32 bits, wrapping as FlashInfer's int32 arithmetic does.
    p.positions[j] = int32_t(uint32_t(j) + uint32_t(p.seq_lens[b]) - uint32_t(p.append_indptr[b + 1]));
  }
}

}  // namespace attnjit

// Division by a run-time divisor fixed for the whole kernel (a page size)
// as a multiply-high, add and shift instead of the ~20-instruction integer
// division: q = (mulhi(n, m) + n) >> s with s = ceil(log2 d) and
// m = floor(2^32 (2^s - d) / d) + 1 (Granlund-Montgomery, the form FlashInfer's
// uint_fastdiv uses). Exact for 0 <= n < 2^31, the range of row positions.
// Host and device: the host test checks it against / and %.
#pragma once
#include "platform.cuh"

namespace attnjit {

struct FastDivmod {
  uint32_t d, m, s;

  FastDivmod() = default;
  // divisor >= 1. Built once per thread: a count of leading zeros and one
  // 64-bit division.
  ATTNJIT_HOST_DEVICE explicit FastDivmod(uint32_t divisor) : d(divisor), m(0), s(0) {
#if defined(__CUDA_ARCH__)
    s = 32 - __clz(int(d - 1));  // ceil(log2 d); __clz(0) = 32 gives 0 for d = 1
#else
    while ((uint64_t(1) << s) < d) ++s;
#endif
    // A power of two (page sizes usually are) needs m = 1: skip the 64-bit
    // division, a ~100-instruction subroutine on the device.
    m = (d & (d - 1)) == 0 ? 1u : uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << s) - d)) / d + 1);
  }

  ATTNJIT_HOST_DEVICE uint32_t div(uint32_t n) const { return (mulhi(n, m) + n) >> s; }
  ATTNJIT_HOST_DEVICE void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * d;
  }

 private:
  ATTNJIT_HOST_DEVICE static uint32_t mulhi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return uint32_t((uint64_t(a) * b) >> 32);
#endif
  }
};

}  // namespace attnjit

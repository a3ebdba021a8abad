#include "bench/bench_support.hpp"

#include <algorithm>
#include <random>

namespace attnjit::bench {

DeviceMem::DeviceMem(size_t n) { ATTNJIT_CU(cuda::driver().MemAlloc(&p, std::max<size_t>(n, 256))); }
DeviceMem::~DeviceMem() { cuda::driver().MemFree(p); }

void fill_random(CUdeviceptr p, size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> chunk(1 << 22);
  for (auto& x : chunk) x = static_cast<uint16_t>(0x3c00 ^ (rng() & 0x83ff));
  const size_t cbytes = chunk.size() * 2;
  for (size_t off = 0; off < bytes; off += cbytes)
    ATTNJIT_CU(cuda::driver().MemcpyHtoD(p + off, chunk.data(), std::min(cbytes, bytes - off)));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double copy_bandwidth(CUstream stream) {
  const size_t n = size_t(1) << 30;
  DeviceMem src(n), dst(n);
  fill_random(src.p, n, 1);
  auto batch = [&] { ATTNJIT_CU(cuda::driver().MemcpyDtoDAsync(dst.p, src.p, n, stream)); };
  const double us = median_us(batch, 1, 20, stream);
  return 2.0 * n / (us * 1e-6);
}

int rotation_sets(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((size_t(400) << 20) / std::max<size_t>(bytes, 1) + 1, 2, 64));
}

}  // namespace attnjit::bench

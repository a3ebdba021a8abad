// What every operator's benchmark needs: device buffers of random data,
// CUDA-event timing (median of many batches after warm-up) and the copy
// ceiling every figure is divided by. Used by `attnjit bench` only.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/driver.hpp"

namespace attnjit::bench {

struct DeviceMem {
  CUdeviceptr p = 0;
  explicit DeviceMem(size_t n);
  ~DeviceMem();
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  void* get() const { return reinterpret_cast<void*>(p); }
};

// Random 16-bit values with |x| in [0.5, 2) and random sign (valid f16 and
// bf16; fp8 bytes too), never zeros: zeros run faster.
void fill_random(CUdeviceptr p, size_t bytes, uint32_t seed);

// Median microseconds per launch of `launch_batch` (which enqueues `batch`
// launches on `stream`), over `reps` timed batches after 3 warm-up batches.
template <class F>
double median_us(F&& launch_batch, int batch, int reps, CUstream stream);

// Bytes read + written per second by a 1 GiB device-to-device copy: the
// ceiling every bandwidth figure in one run is divided by.
double copy_bandwidth(CUstream stream);

// How many copies of `bytes` of input to rotate through so one pass touches
// more than 4x the 50 MB L2.
int rotation_sets(size_t bytes);

double median(std::vector<double> v);

template <class F>
double median_us(F&& launch_batch, int batch, int reps, CUstream stream) {
  const auto& cu = cuda::driver();
  CUevent a, b;
  ATTNJIT_CU(cu.EventCreate(&a, 0));
  ATTNJIT_CU(cu.EventCreate(&b, 0));
  for (int i = 0; i < 3; ++i) launch_batch();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    ATTNJIT_CU(cu.EventRecord(a, stream));
    launch_batch();
    ATTNJIT_CU(cu.EventRecord(b, stream));
    ATTNJIT_CU(cu.EventSynchronize(b));
    float ms = 0;
    ATTNJIT_CU(cu.EventElapsedTime(&ms, a, b));
    t.push_back(1000.0 * ms / batch);
  }
  cu.EventDestroy(a);
  cu.EventDestroy(b);
  return median(std::move(t));
}

}  // namespace attnjit::bench

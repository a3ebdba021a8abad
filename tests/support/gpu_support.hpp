// GPU tests are tagged [gpu]; without a driver and device they SKIP with a
// message saying why (Catch2 v2 has no SKIP: we WARN and return, and the
// message is printed in the run's output).
#pragma once
#include <catch2/catch.hpp>

#include <string>

#include "attnjit/runtime.hpp"
#include "cuda/driver.hpp"

namespace attnjit::test {

// True when a CUDA device is usable; otherwise emits the reason once per test.
inline bool gpu_available() {
  if (cuda::driver_available()) {
    int n = 0;
    if (cuda::driver().DeviceGetCount(&n) == CUDA_SUCCESS && n > 0) return true;
    WARN("SKIPPED (no GPU): the driver loaded but reports no CUDA device");
    return false;
  }
  WARN("SKIPPED (no GPU): " << cuda::driver_unavailable_reason());
  return false;
}

// True where rt's device is Hopper (sm_90a); otherwise WARNs that `what` needs it,
// and the test returns.
inline bool on_sm90a(const Runtime& rt, const std::string& what) {
  if (rt.default_arch() == "sm_90a") return true;
  WARN("SKIPPED: " << what << " needs sm_90a; this device is " << rt.default_arch());
  return false;
}

}  // namespace attnjit::test

#define ATTNJIT_REQUIRE_GPU() \
  do {                        \
    if (!::attnjit::test::gpu_available()) return; \
  } while (0)

// For a test that allocates device memory or calls the driver itself:
// ATTNJIT_REQUIRE_GPU(), then device 0's primary context current until the
// test returns (the scope guard this declares).
#define ATTNJIT_REQUIRE_GPU_CONTEXT() \
  ATTNJIT_REQUIRE_GPU();              \
  const ::attnjit::cuda::ScopedDevice attnjit_gpu_context_scope(0)

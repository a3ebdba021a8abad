// The driver loader. Correct both here (no libcuda) and on a GPU machine: each
// test checks whichever of the two situations it finds itself in.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <string>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "support/error_capture.hpp"

using attnjit::Error;
using attnjit::Status;
namespace cuda = attnjit::cuda;

using attnjit::test::error_of;

namespace {

// Asked of the loader directly, independently of the code under test.
bool libcuda_loads() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

}  // namespace

TEST_CASE("compute capability names the arch-specific target from 9.0 on", "[driver]") {
  CHECK(cuda::arch_for_compute_capability(8, 0) == "sm_80");
  CHECK(cuda::arch_for_compute_capability(8, 6) == "sm_86");
  CHECK(cuda::arch_for_compute_capability(8, 9) == "sm_89");
  CHECK(cuda::arch_for_compute_capability(9, 0) == "sm_90a");
  CHECK(cuda::arch_for_compute_capability(10, 0) == "sm_100a");
  CHECK(cuda::arch_for_compute_capability(12, 0) == "sm_120a");
}

TEST_CASE("without a usable driver, every entry point says what is missing", "[driver]") {
  if (cuda::driver_available()) {
    CHECK(cuda::driver_unavailable_reason().empty());
    return;  // covered by the next test
  }
  const std::string reason = cuda::driver_unavailable_reason();
  REQUIRE_FALSE(reason.empty());
  if (!libcuda_loads()) {
    CHECK_THAT(reason, Catch::Contains("libcuda.so.1 could not be loaded"));
    CHECK_THAT(reason, Catch::Contains("cannot launch"));
  }
  CHECK(error_of([] { cuda::driver(); }, Status::NoDevice) == reason);
  CHECK(error_of([] { cuda::arch_of_device(0); }, Status::NoDevice) == reason);
  CHECK(error_of([] { cuda::ScopedDevice scope(0); }, Status::NoDevice) == reason);
}

TEST_CASE("with a driver, devices are named and contexts are scoped", "[driver]") {
  if (!cuda::driver_available()) {
    WARN("SKIPPED (no GPU): " << cuda::driver_unavailable_reason());
    return;
  }
  const cuda::DriverApi& api = cuda::driver();
  int count = 0;
  ATTNJIT_CU(api.DeviceGetCount(&count));
  REQUIRE(count >= 1);
  CHECK_THAT(cuda::arch_of_device(0), Catch::StartsWith("sm_"));
  const auto msg = error_of([&] { cuda::arch_of_device(count); }, Status::InvalidArgument);
  CHECK_THAT(msg, Catch::Contains("device=" + std::to_string(count)) &&
                      Catch::Contains(std::to_string(count) + " device"));

  CUcontext before = nullptr;
  ATTNJIT_CU(api.CtxGetCurrent(&before));
  {
    cuda::ScopedDevice outer(0);
    CUcontext inside = nullptr;
    ATTNJIT_CU(api.CtxGetCurrent(&inside));
    REQUIRE(inside != nullptr);
    {
      // Already on device 0: the current context must be left exactly as is.
      cuda::ScopedDevice inner(0);
      CUcontext nested = nullptr;
      ATTNJIT_CU(api.CtxGetCurrent(&nested));
      CHECK(nested == inside);
    }
    CUcontext after_inner = nullptr;
    ATTNJIT_CU(api.CtxGetCurrent(&after_inner));
    CHECK(after_inner == inside);
  }
  CUcontext after = nullptr;
  ATTNJIT_CU(api.CtxGetCurrent(&after));
  CHECK(after == before);
}

TEST_CASE("check() turns a CUresult into a CudaError naming the call", "[driver]") {
  CHECK_NOTHROW(cuda::check(CUDA_SUCCESS, "cuNothing()"));
  const auto msg = error_of([] { ATTNJIT_CU(CUDA_ERROR_INVALID_VALUE); }, Status::CudaError);
  CHECK_THAT(msg, Catch::Contains("CUDA_ERROR_INVALID_VALUE failed") && Catch::Contains("= 1"));
  if (cuda::driver_available()) CHECK_THAT(msg, Catch::Contains("CUDA_ERROR_INVALID_VALUE = 1"));
}

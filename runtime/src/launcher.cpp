#include "launcher.hpp"

#include "cuda/driver.hpp"

namespace attnjit::detail {

void launch(const Kernel& kernel, const ops::LaunchShape& shape, const void* params, Stream stream, bool pdl) {
  CUlaunchConfig cfg{};
  cfg.gridDimX = shape.grid[0];
  cfg.gridDimY = shape.grid[1];
  cfg.gridDimZ = shape.grid[2];
  cfg.blockDimX = shape.threads;
  cfg.blockDimY = 1;
  cfg.blockDimZ = 1;
  cfg.sharedMemBytes = shape.smem_bytes;
  cfg.hStream = stream;
  CUlaunchAttribute attr{};
  if (pdl) {
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  void* args[] = {const_cast<void*>(params)};
  // A CUkernel is accepted where a CUfunction is expected and runs in the
  // current context (CUDA 12 context-independent loading).
  ATTNJIT_CU(cuda::driver().LaunchKernelEx(&cfg, reinterpret_cast<CUfunction>(kernel.kernel), args, nullptr));
}

}  // namespace attnjit::detail

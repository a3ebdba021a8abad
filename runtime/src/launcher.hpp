// Launches a loaded kernel with its one params struct on the caller's stream.
// No allocation, no synchronization: safe inside CUDA-graph capture.
#pragma once
#include <cstdint>

#include "attnjit/tensor.hpp"
#include "engine.hpp"

namespace attnjit::detail {

struct LaunchShape {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t threads = 128;
  uint32_t smem_bytes = 0;
};

void launch(const Kernel& kernel, const LaunchShape& shape, const void* params, Stream stream);

}  // namespace attnjit::detail

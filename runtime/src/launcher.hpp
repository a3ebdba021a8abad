// Launches a loaded kernel with its one params struct on the caller's stream.
// No allocation, no synchronization: safe inside CUDA-graph capture.
#pragma once
#include <cstdint>

#include "attnjit/tensor.hpp"
#include "engine.hpp"
#include "ops/launch_shape.hpp"

namespace attnjit::detail {

void launch(const Kernel& kernel, const ops::LaunchShape& shape, const void* params, Stream stream);

}  // namespace attnjit::detail

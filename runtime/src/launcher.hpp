// Launches a loaded kernel with its one params struct on the caller's stream.
// No allocation, no synchronization: safe inside CUDA-graph capture.
#pragma once
#include <cstdint>

#include "attnjit/tensor.hpp"
#include "engine.hpp"
#include "ops/launch_shape.hpp"

namespace attnjit::detail {

// pdl: programmatic dependent launch (sm_90+): the kernel may start while the
// previous kernel on `stream` finishes; the kernels wait for it with
// griddepcontrol.wait before their first global read (kernels/platform.cuh).
void launch(const Kernel& kernel, const ops::LaunchShape& shape, const void* params, Stream stream,
            bool pdl = false);

}  // namespace attnjit::detail

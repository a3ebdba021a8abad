// Launches a prefill kernel with its params: the wgmma and mma.sync
// skeletons take PrefillParams as they are; the warp-specialized skeleton
// (kernels/prefill_sm90_ws.cuh) takes them with TMA maps of K and V, encoded
// here from the params for every launch (a few microseconds of host work,
// no device call, so graph capture records them by value).
#pragma once
#include "attnjit/tensor.hpp"
#include "engine.hpp"
#include "ops/launch_shape.hpp"
#include "prefill_params.h"

namespace attnjit::ops {

void launch_prefill(const detail::Kernel& kernel, const LaunchShape& shape, const kernels::PrefillParams& p, Stream stream);

}  // namespace attnjit::ops

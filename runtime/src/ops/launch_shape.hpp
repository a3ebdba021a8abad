// How one kernel of a plan is launched: grid, block and dynamic shared memory.
// Plain data the planner produces and the launcher consumes, so the planner
// needs neither the launcher nor a loaded kernel.
#pragma once
#include <cstdint>

namespace attnjit::ops {

struct LaunchShape {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t threads = 128;
  uint32_t smem_bytes = 0;
};

}  // namespace attnjit::ops

// Every kernel a batch-prefill plan of a problem may choose, whatever its
// lengths and on any device (prewarm compiles them all; it drops the Hopper
// skeleton's for other archs). Enumerated from the planner's own choices
// (batch_prefill_planner.cpp): the skeleton (prefill_backend), its query tile
// (prefill_frags_m, fit_fa3_tile; CUDA-graph mode keeps fa3 at two
// warpgroups), each through choose_prefill_pipeline, and the merge a KV split
// adds (never in CUDA-graph mode). tests/batch_prefill/entry_test.cpp plans
// random batches against this list.
#pragma once
#include <vector>

#include "ops/batch_prefill/batch_prefill_problem.hpp"
#include "spec/kernel_spec.hpp"

namespace attnjit::ops {

std::vector<KernelSpec> batch_prefill_kernels(const BatchPrefillProblem& p);

}  // namespace attnjit::ops

// The page helpers' launches: which kernel, how many CTAs, and for the
// append the access width and how a CTA's threads split into rows. Pure
// host code; the device enters as figures.
#pragma once
#include <nlohmann/json.hpp>

#include <vector>

#include "ops/operator.hpp"
#include "ops/page/page_problem.hpp"

namespace attnjit::ops {

struct PageLaunch {
  KernelLaunch kernel;
  int64_t items = 0;   // append: rows (token, head); positions: entries. 0: nothing to launch
  int vec_bytes = 0;   // append: bytes per access
  int chunks = 0;      // append: accesses per row (K and V each)
  int lanes_log2 = 0;  // append: threads per row = 1 << lanes_log2

  nlohmann::json to_json() const;  // for `explain`
};

// Validate, then plan.
PageLaunch plan_page_append(const PageAppendProblem& p, const DeviceFigures& device);
PageLaunch plan_batch_positions(const BatchPositionsProblem& p, const DeviceFigures& device);

PageKernel page_append_spec(DType kv_dtype);
PageKernel batch_positions_spec();
// The kernels a problem needs whatever its sizes (prewarm).
std::vector<KernelSpec> page_kernels(const PageProblem& p);

}  // namespace attnjit::ops

// What FlashInfer's wrapper needs of a BatchDecodePlan beyond its public API:
// the wrapper owns the plan memory (it outlives each plan the wrapper makes,
// and a captured graph keeps its address), and uploads its page table in the
// same copy as the plan's work list; its workspace_size() sizes a plan
// without making one.
#pragma once
#include <memory>
#include <vector>

#include "attnjit/batch_decode.hpp"
#include "ops/batch_decode/batch_decode_planner.hpp"
#include "plan_memory.hpp"

namespace attnjit::detail {

struct BatchDecodePlanInternals {
  // The planner's layout for `problem` on its device (what the constructor
  // plans; validates, loads nothing).
  static ops::BatchDecodeLayout layout_for(const Runtime& rt, const BatchDecodeProblem& problem);
  // Where plan_with_arrays puts arrays of these entry counts (int32) after the
  // layout's int regions, and in `total` the plan memory that upload fills.
  static std::vector<size_t> array_offsets(const ops::WorkspaceLayout& ws, const std::vector<size_t>& entries,
                                           size_t& total);
  static void share_memory(BatchDecodePlan& plan, std::shared_ptr<PlanMemory> memory);
  // plan(), also uploading `arrays` after the plan's own regions; returns
  // each array's device address (null for an empty one).
  static std::vector<const int32_t*> plan_with_arrays(BatchDecodePlan& plan, const int32_t* kv_lens, int batch,
                                                      Stream stream,
                                                      const std::vector<const std::vector<int32_t>*>& arrays);
  // run(), with the kernels' device-table faults recorded in `check` under
  // `names` (kernels/table_check.h): the one-call entry points pass the
  // engine's record of the device and their own argument names.
  static void run(const BatchDecodePlan& plan, const TensorView& q, const PagedKVView& kv, const TensorView& o,
                  const TensorView* lse, void* workspace, size_t workspace_bytes, Stream stream, float k_scale,
                  float v_scale, const BatchDecodeLaunchExtras& extras, TableCheck& check, int32_t names);
};

}  // namespace attnjit::detail

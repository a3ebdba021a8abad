// What the ragged and paged batch prefill wrappers share: the caller's
// workspace (scratch for a KV split's partial states), the wrapper's plan
// memory, plan() (validate, plan, load kernels, upload the arrays into the
// plan memory on the caller's stream) and the launch of the prefill and merge
// kernels from a filled params struct.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnjit/batch_prefill.hpp"
#include "engine.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/block_mask_keep.hpp"
#include "plan_memory.hpp"

namespace attnjit::ops {

struct BatchPrefillCore {
  const Runtime* rt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  KVLayout kv_layout = KVLayout::NHD;
  std::string backend = "auto";
  int device = 0;

  std::optional<BatchPrefillCudaGraphBuffers> graph;  // CUDA-graph mode
  // The work list and index arrays every run() reads (kept across plans;
  // in CUDA-graph mode its address is fixed once planned).
  std::unique_ptr<detail::PlanMemory> memory;

  bool planned = false;
  bool planned_once = false;  // layout holds a plan (kept through a failed re-plan, for the graph-mode checks)
  BatchPrefillShape shape;
  BatchPrefillLayout layout;
  std::shared_ptr<detail::Kernel> prefill, merge, block_mask;
  // A block-sparse variant's classes kept across runs (Reclassify::OnBind); stale after every plan().
  std::unique_ptr<BlockMaskKeep> kept_classes;
  // How far the plan reaches into K/V: ragged, the KV rows (kv_indptr[-1]);
  // paged, the pages (the largest page id + 1).
  int64_t kv_extent = 0;
  int page_size = 0;
  // CUDA-graph mode: the fewest q rows and K/V rows (ragged) or pages (paged)
  // any run() was given. A graph may have captured that run, so a later plan
  // must stay inside them. -1: no run yet.
  mutable int64_t graph_q_rows = -1, graph_kv_extent = -1;

  BatchPrefillCore(const Runtime& r, void* ws, size_t ws_bytes, KVLayout layout_, std::string backend_, int dev,
                   std::optional<BatchPrefillCudaGraphBuffers> graph_ = {});

  // Plans `s` (its options' backend is the wrapper's), then uploads: the work
  // list (CUDA-graph mode: the tile counts), qo_indptr, kv_indptr, and (when
  // non-empty) the paged arrays and the packed mask with its per-request byte
  // offsets, into the plan memory or, in CUDA-graph mode, the caller's buffers.
  void plan(BatchPrefillShape s, int64_t kv_extent, const std::vector<int32_t>& kv_indptr,
            const std::vector<int32_t>& page_indices, const std::vector<int32_t>& last_page_len,
            const std::vector<bool>& custom_mask, Stream stream);
  // What plan() decides before it touches the device, and what
  // workspace_size() reports: the checks (the graph-mode ones against the
  // runs so far), the planner's layout and the packed mask. Changes nothing.
  struct Prepared {
    BatchPrefillShape shape;
    BatchPrefillLayout layout;
    std::vector<uint8_t> packed_mask;
    std::vector<int32_t> mask_offsets;
  };
  Prepared prepare(BatchPrefillShape s, int64_t kv_extent, const std::vector<bool>& custom_mask) const;
  // FlashInfer's workspace_size(): the float scratch and the plan memory a
  // plan() with these arguments needs (the layout's two parts).
  WorkspaceSizes workspace_size(BatchPrefillShape s, int64_t kv_extent, const std::vector<bool>& custom_mask) const;
  // CUDA-graph mode: the plan fits the fixed buffers and every run() so far.
  void check_graph_plan(const BatchPrefillShape& s, int64_t extent) const;
  // q, o, lse checked against the plan; params for the kernels (KV left to the caller).
  // k_scale, v_scale: fp8 calibration (> 0, finite), folded into the logit scale and the output.
  kernels::PrefillParams params(const TensorView& q, const TensorView& o, const TensorView* lse,
                                std::optional<float> k_scale, std::optional<float> v_scale) const;
  // The K/V extent run() was given, checked against the plan: exactly the
  // plan's rows (ragged) or enough pages; in CUDA-graph mode at least the plan's.
  void check_kv_extent(int64_t given, const char* arg) const;
  // Where an uploaded index array lives: a plan-memory region or a graph buffer.
  template <class T>
  T* array(const char* name) const;
  // A block-sparse plan first classifies its tiles (or, under on_bind, reuses what it kept).
  void launch(const kernels::PrefillParams& p, const TensorView& o, Stream stream) const;
  // A new scratch workspace; the plan stays valid if it fits there.
  void reset_workspace(void* ws, size_t bytes);
  // FlashInfer's int_workspace_buffer: the plan memory is the caller's
  // buffer from now on, so plan() again; a graph captured before would
  // replay the old memory, so the graph-mode constraints start afresh.
  void use_int_workspace(void* buffer, size_t bytes);
  size_t plan_memory_bytes() const { return planned ? memory->used() : 0; }
  void require_planned(const char* what) const;
  // Waits for the device and raises a bad device-table entry a run met
  // (plan() and run() raise one at their start, without waiting).
  void check() const;
  std::string describe() const;
};

}  // namespace attnjit::ops

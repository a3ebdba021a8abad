// Batch prefill / append attention (FlashInfer's
// BatchPrefillWithRaggedKVCacheWrapper and BatchPrefillWithPagedKVCacheWrapper):
// plan() once per batch layout (it takes the index arrays on the host, plans
// the work list and uploads it with the arrays into the wrapper's plan
// memory on the given stream), run() per layer (launches only).
//
// Memory, as FlashInfer's: the workspace is the caller's scratch, holding the
// partial states of a split KV while a run() executes (workspace_bytes()
// after plan() says how much), so wrappers may share one on a stream and be
// planned in any order before they run. The uploaded arrays live in memory
// the wrapper owns (plan_memory_bytes()), or in a caller's buffer given to
// set_int_workspace() (FlashInfer's int_workspace_buffer).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnjit/prefill.hpp"
#include "attnjit/runtime.hpp"
#include "attnjit/tensor.hpp"
#include "attnjit/types.hpp"
#include "attnjit/variant.hpp"

namespace attnjit {

struct BatchPrefillPlanOptions {
  bool causal = false;  // ignored with a custom mask
  PosEncoding pos_encoding_mode = PosEncoding::None;
  bool allow_fp16_qk_reduction = false;  // accepted and ignored: fp32 accumulation always
  int window_left = -1;
  std::optional<float> logits_soft_cap, sm_scale, rope_scale, rope_theta;
  DType q_data_type = DType::F16;
  std::optional<DType> kv_data_type;  // default: q_data_type
  // The output's dtype; default q_data_type. fp8 q (float8_e4m3fn, with
  // e4m3 K/V, ragged wrapper only): float16 or bfloat16, required.
  std::optional<DType> o_data_type;
  // FlashInfer's flattened boolean mask, every request's [qo_len, kv_len]
  // block row-major, one after another (sum of qo_len * kv_len entries).
  // Empty: none. plan() packs it (bit order little-endian) and uploads it.
  std::vector<bool> custom_mask;
  // A user variant, as PrefillOptions::variant (b: the request); run() reads
  // its bound values each time.
  std::shared_ptr<const Variant> variant;
};

// CUDA-graph mode (FlashInfer's use_cuda_graph=True with its *_buf
// arguments): device buffers of the caller's that plan() copies the index
// arrays into, so a run() captured in a graph replays whatever the latest
// plan() planned. The launch is fixed: one wave of persistent CTAs walks the
// batch's query tiles (read from the workspace), each tile over its whole KV
// (no split: partial states would need a bound on the query rows that the
// API does not give). Every buffer must outlive the wrapper.
struct BatchPrefillCudaGraphBuffers {
  int max_batch_size = 0;                     // plans may have 1 .. max_batch_size requests
  int32_t* qo_indptr = nullptr;               // [max_batch_size + 1]
  int32_t* kv_indptr = nullptr;               // [max_batch_size + 1]: kv_indptr (ragged) / paged_kv_indptr
  int32_t* paged_kv_indices = nullptr;        // paged: [max_num_pages]
  int64_t max_num_pages = 0;
  int32_t* paged_kv_last_page_len = nullptr;  // paged: [max_batch_size]
  uint8_t* custom_mask = nullptr;             // optional, for plans with a custom mask: packed bits
  int64_t custom_mask_bytes = 0;
  int32_t* qk_indptr = nullptr;               // with custom_mask: [max_batch_size + 1] (byte offsets)
};

class ATTNJIT_API BatchPrefillWithRaggedKVCacheWrapper {
 public:
  BatchPrefillWithRaggedKVCacheWrapper(const Runtime& rt, void* workspace, size_t workspace_bytes,
                                       KVLayout kv_layout = KVLayout::NHD, std::string backend = "auto",
                                       int device = 0);
  // CUDA-graph mode: plans of at most graph.max_batch_size requests; q, o
  // (and k, v) may have more rows than a plan uses, and a later plan may not
  // use more than the run a graph captured was given.
  BatchPrefillWithRaggedKVCacheWrapper(const Runtime& rt, void* workspace, size_t workspace_bytes,
                                       const BatchPrefillCudaGraphBuffers& graph, KVLayout kv_layout = KVLayout::NHD,
                                       std::string backend = "auto", int device = 0);
  ~BatchPrefillWithRaggedKVCacheWrapper();

  // qo_indptr, kv_indptr: [batch + 1] host arrays.
  void plan(const std::vector<int32_t>& qo_indptr, const std::vector<int32_t>& kv_indptr, int num_qo_heads,
            int num_kv_heads, int head_dim, const BatchPrefillPlanOptions& options, Stream stream);
  // What plan() with these arguments needs, without planning (FlashInfer's
  // workspace_size): float_bytes of the workspace (plan() refuses a smaller
  // one; workspace_bytes() after it), int_bytes of plan memory
  // (plan_memory_bytes() after it). plan()'s checks and errors, the
  // CUDA-graph ones against the runs so far included; nothing is allocated,
  // uploaded or loaded and the current plan stays. Reads the device's figures.
  WorkspaceSizes workspace_size(const std::vector<int32_t>& qo_indptr, const std::vector<int32_t>& kv_indptr,
                                int num_qo_heads, int num_kv_heads, int head_dim,
                                const BatchPrefillPlanOptions& options) const;
  // q [nnz_qo, H_qo, D]; k, v [nnz_kv, H_kv, D] (NHD) or [H_kv, nnz_kv, D] (HND);
  // o [nnz_qo, H_qo, D] contiguous rows; lse [nnz_qo, H_qo] float32 or null.
  void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
           const TensorView* lse, Stream stream) const;
  // With fp8 calibration scales, as the paged wrapper's run (an attnjit extension here).
  void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
           const TensorView* lse, std::optional<float> k_scale, std::optional<float> v_scale, Stream stream) const;
  // A new scratch workspace; the current plan stays valid (it must fit).
  void reset_workspace_buffer(void* workspace, size_t workspace_bytes);
  // The plan memory is `buffer` (device, 256-byte aligned, outliving the
  // wrapper) from now on; plan() again.
  void set_int_workspace(void* buffer, size_t bytes);
  size_t workspace_bytes() const;    // scratch the current plan needs (0 before plan())
  size_t plan_memory_bytes() const;  // plan memory the current plan uses (0 before plan())
  std::string describe() const;
  // Waits for the device, then raises Error(InvalidArgument) for a bad
  // device-table entry a run met (see the paged wrapper); plan() and run()
  // raise one at their start without waiting. The ragged wrapper reads no
  // page table: nothing is recorded for it.
  void check() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

class ATTNJIT_API BatchPrefillWithPagedKVCacheWrapper {
 public:
  BatchPrefillWithPagedKVCacheWrapper(const Runtime& rt, void* workspace, size_t workspace_bytes,
                                      KVLayout kv_layout = KVLayout::NHD, std::string backend = "auto",
                                      int device = 0);
  // CUDA-graph mode, as for the ragged wrapper (paged_kv_indices and
  // paged_kv_last_page_len buffers required).
  BatchPrefillWithPagedKVCacheWrapper(const Runtime& rt, void* workspace, size_t workspace_bytes,
                                      const BatchPrefillCudaGraphBuffers& graph, KVLayout kv_layout = KVLayout::NHD,
                                      std::string backend = "auto", int device = 0);
  ~BatchPrefillWithPagedKVCacheWrapper();

  // Host arrays: qo_indptr, paged_kv_indptr [batch + 1]; paged_kv_indices
  // [paged_kv_indptr[-1]]; paged_kv_last_page_len [batch], each in [1, page_size].
  void plan(const std::vector<int32_t>& qo_indptr, const std::vector<int32_t>& paged_kv_indptr,
            const std::vector<int32_t>& paged_kv_indices, const std::vector<int32_t>& paged_kv_last_page_len,
            int num_qo_heads, int num_kv_heads, int head_dim, int page_size, const BatchPrefillPlanOptions& options,
            Stream stream);
  // As the ragged wrapper's workspace_size, for this plan().
  WorkspaceSizes workspace_size(const std::vector<int32_t>& qo_indptr, const std::vector<int32_t>& paged_kv_indptr,
                                const std::vector<int32_t>& paged_kv_indices,
                                const std::vector<int32_t>& paged_kv_last_page_len, int num_qo_heads,
                                int num_kv_heads, int head_dim, int page_size,
                                const BatchPrefillPlanOptions& options) const;
  // k_cache, v_cache: [max_num_pages, page_size, H_kv, D] (NHD) or
  // [max_num_pages, H_kv, page_size, D] (HND), any page stride (a 5-D cache
  // [pages, 2, ...] is the pair of views cache[:, 0], cache[:, 1]).
  void run(const TensorView& q, const TensorView& k_cache, const TensorView& v_cache, const TensorView& o,
           const TensorView* lse, Stream stream) const;
  // With fp8 calibration scales (default 1): k_scale multiplies the logits'
  // scale, v_scale the output.
  void run(const TensorView& q, const TensorView& k_cache, const TensorView& v_cache, const TensorView& o,
           const TensorView* lse, std::optional<float> k_scale, std::optional<float> v_scale, Stream stream) const;
  void reset_workspace_buffer(void* workspace, size_t workspace_bytes);
  void set_int_workspace(void* buffer, size_t bytes);
  size_t workspace_bytes() const;
  size_t plan_memory_bytes() const;
  std::string describe() const;
  // Waits for the device, then raises Error(InvalidArgument) naming a bad
  // entry the kernels met in the page table on the device (a page id past
  // k_cache, an indptr or last page length outside the table: in CUDA-graph
  // mode the caller may overwrite the fixed buffers before a replay). Such an
  // entry reads nothing outside the cache; that request's output is void, the
  // others' stay right. plan() and run() raise one at their start, without
  // waiting; ATTNJIT_CHECK=1 makes every run wait for its stream and raise.
  void check() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnjit

// BatchPrefillWithRaggedKVCacheWrapper and BatchPrefillWithPagedKVCacheWrapper:
// each turns its index arrays into the planner's shape (lengths per request)
// and its K/V tensors into KVSourceParams; the rest is BatchPrefillCore.
#include <fmt/format.h>

#include <algorithm>

#include "attnjit/batch_prefill.hpp"
#include "attnjit/error.hpp"
#include "ops/batch_prefill/batch_prefill_core.hpp"
#include "ops/plan_fill.hpp"
#include "ops/tensor_checks.hpp"
#include "invalid_argument.hpp"

namespace attnjit {

namespace {

ops::BatchPrefillShape base_shape(const std::vector<int32_t>& qo_indptr, int num_qo_heads, int num_kv_heads,
                                  int head_dim, const BatchPrefillPlanOptions& o) {
  ops::BatchPrefillShape s;
  s.qo_indptr = qo_indptr;
  s.num_qo_heads = num_qo_heads;
  s.num_kv_heads = num_kv_heads;
  s.head_dim = head_dim;
  s.q_dtype = o.q_data_type;
  s.kv_dtype = o.kv_data_type.value_or(o.q_data_type);
  auto& p = s.options;
  p.causal = o.causal;
  p.custom_mask = !o.custom_mask.empty();
  p.pos_encoding_mode = o.pos_encoding_mode;
  p.allow_fp16_qk_reduction = o.allow_fp16_qk_reduction;
  p.window_left = o.window_left;
  p.logits_soft_cap = o.logits_soft_cap;
  if (p.logits_soft_cap && *p.logits_soft_cap == 0.f) p.logits_soft_cap.reset();
  p.sm_scale = o.sm_scale;
  p.rope_scale = o.rope_scale;
  p.rope_theta = o.rope_theta;
  p.variant = o.variant;
  // Unset, or q's for 16-bit q, plans the same kernel: left unset then (one problem, one key).
  if (o.o_data_type && *o.o_data_type != o.q_data_type) p.o_dtype = o.o_data_type;
  return s;
}

}  // namespace

// ---- ragged ----------------------------------------------------------------

struct BatchPrefillWithRaggedKVCacheWrapper::Impl {
  ops::BatchPrefillCore core;
};

BatchPrefillWithRaggedKVCacheWrapper::BatchPrefillWithRaggedKVCacheWrapper(const Runtime& rt, void* workspace,
                                                                           size_t workspace_bytes, KVLayout kv_layout,
                                                                           std::string backend, int device)
    : impl_(new Impl{ops::BatchPrefillCore(rt, workspace, workspace_bytes, kv_layout, std::move(backend), device)}) {}
BatchPrefillWithRaggedKVCacheWrapper::BatchPrefillWithRaggedKVCacheWrapper(const Runtime& rt, void* workspace,
                                                                           size_t workspace_bytes,
                                                                           const BatchPrefillCudaGraphBuffers& graph,
                                                                           KVLayout kv_layout, std::string backend,
                                                                           int device)
    : impl_(new Impl{
          ops::BatchPrefillCore(rt, workspace, workspace_bytes, kv_layout, std::move(backend), device, graph)}) {}
BatchPrefillWithRaggedKVCacheWrapper::~BatchPrefillWithRaggedKVCacheWrapper() = default;

namespace {

// The planner's shape of a ragged batch (the index arrays checked); the K/V rows it reaches go to `extent`.
ops::BatchPrefillShape ragged_shape(const std::vector<int32_t>& qo_indptr, const std::vector<int32_t>& kv_indptr,
                                    int num_qo_heads, int num_kv_heads, int head_dim,
                                    const BatchPrefillPlanOptions& options, int64_t& extent) {
  ops::BatchPrefillShape s = base_shape(qo_indptr, num_qo_heads, num_kv_heads, head_dim, options);
  s.source = KVSource::Ragged;
  if (qo_indptr.size() < 2)
    invalid(fmt::format("qo_indptr: {} entries is not allowed; it needs batch_size + 1 >= 2", qo_indptr.size()));
  ops::check_indptr(kv_indptr, "kv_indptr", qo_indptr.size() - 1, false);
  for (size_t b = 0; b + 1 < kv_indptr.size(); ++b) s.kv_lens.push_back(kv_indptr[b + 1] - kv_indptr[b]);
  extent = kv_indptr.back();
  return s;
}

}  // namespace

void BatchPrefillWithRaggedKVCacheWrapper::plan(const std::vector<int32_t>& qo_indptr,
                                                const std::vector<int32_t>& kv_indptr, int num_qo_heads,
                                                int num_kv_heads, int head_dim, const BatchPrefillPlanOptions& options,
                                                Stream stream) {
  int64_t extent = 0;
  ops::BatchPrefillShape s = ragged_shape(qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim, options, extent);
  impl_->core.plan(std::move(s), extent, kv_indptr, {}, {}, options.custom_mask, stream);
}

WorkspaceSizes BatchPrefillWithRaggedKVCacheWrapper::workspace_size(const std::vector<int32_t>& qo_indptr,
                                                                    const std::vector<int32_t>& kv_indptr,
                                                                    int num_qo_heads, int num_kv_heads, int head_dim,
                                                                    const BatchPrefillPlanOptions& options) const {
  int64_t extent = 0;
  ops::BatchPrefillShape s = ragged_shape(qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim, options, extent);
  return impl_->core.workspace_size(std::move(s), extent, options.custom_mask);
}

void BatchPrefillWithRaggedKVCacheWrapper::run(const TensorView& q, const TensorView& k, const TensorView& v,
                                               const TensorView& o, const TensorView* lse, Stream stream) const {
  run(q, k, v, o, lse, std::nullopt, std::nullopt, stream);
}

void BatchPrefillWithRaggedKVCacheWrapper::run(const TensorView& q, const TensorView& k, const TensorView& v,
                                               const TensorView& o, const TensorView* lse,
                                               std::optional<float> k_scale, std::optional<float> v_scale,
                                               Stream stream) const {
  const auto& c = impl_->core;
  kernels::PrefillParams p = c.params(q, o, lse, k_scale, v_scale);
  const int64_t Hk = c.shape.num_kv_heads, D = c.shape.head_dim;
  const bool nhd = c.kv_layout == KVLayout::NHD;
  c.check_kv_extent(k.ndim == 3 ? k.shape[nhd ? 0 : 1] : c.kv_extent, "k");
  const int64_t N = k.ndim == 3 ? k.shape[nhd ? 0 : 1] : c.kv_extent;
  // A vector, not an initializer_list: one kept in a variable outlives its array.
  const std::vector<int64_t> kv_shape = nhd ? std::vector<int64_t>{N, Hk, D} : std::vector<int64_t>{Hk, N, D};
  ops::check_tensor(k, "k", c.shape.kv_dtype, c.device, kv_shape, 16);
  ops::check_tensor(v, "v", c.shape.kv_dtype, c.device, kv_shape, 16);
  // kv_len: the tensor's rows, the extent of the TMA maps (ops/prefill_launch.cpp).
  ops::set_contiguous_kv(p.kv, k, v, c.kv_layout, N);
  c.launch(p, o, stream);
}

void BatchPrefillWithRaggedKVCacheWrapper::reset_workspace_buffer(void* workspace, size_t workspace_bytes) {
  impl_->core.reset_workspace(workspace, workspace_bytes);
}
void BatchPrefillWithRaggedKVCacheWrapper::set_int_workspace(void* buffer, size_t bytes) {
  impl_->core.use_int_workspace(buffer, bytes);
}
size_t BatchPrefillWithRaggedKVCacheWrapper::workspace_bytes() const {
  return impl_->core.planned ? impl_->core.layout.workspace.float_bytes() : 0;
}
size_t BatchPrefillWithRaggedKVCacheWrapper::plan_memory_bytes() const { return impl_->core.plan_memory_bytes(); }
std::string BatchPrefillWithRaggedKVCacheWrapper::describe() const { return impl_->core.describe(); }
void BatchPrefillWithRaggedKVCacheWrapper::check() const { impl_->core.check(); }

// ---- paged -----------------------------------------------------------------

struct BatchPrefillWithPagedKVCacheWrapper::Impl {
  ops::BatchPrefillCore core;
};

BatchPrefillWithPagedKVCacheWrapper::BatchPrefillWithPagedKVCacheWrapper(const Runtime& rt, void* workspace,
                                                                         size_t workspace_bytes, KVLayout kv_layout,
                                                                         std::string backend, int device)
    : impl_(new Impl{ops::BatchPrefillCore(rt, workspace, workspace_bytes, kv_layout, std::move(backend), device)}) {}
BatchPrefillWithPagedKVCacheWrapper::BatchPrefillWithPagedKVCacheWrapper(const Runtime& rt, void* workspace,
                                                                         size_t workspace_bytes,
                                                                         const BatchPrefillCudaGraphBuffers& graph,
                                                                         KVLayout kv_layout, std::string backend,
                                                                         int device)
    : impl_(new Impl{
          ops::BatchPrefillCore(rt, workspace, workspace_bytes, kv_layout, std::move(backend), device, graph)}) {
  if (!graph.paged_kv_indices || !graph.paged_kv_last_page_len || graph.max_num_pages < 1)
    invalid(fmt::format("{} is not allowed with use_cuda_graph=true; the paged wrapper needs paged_kv_indices_buf "
                        "(max_num_pages >= 1 int32) and paged_kv_last_page_len_buf (max_batch_size int32)",
                        !graph.paged_kv_indices         ? "paged_kv_indices_buf=null"
                        : !graph.paged_kv_last_page_len ? "paged_kv_last_page_len_buf=null"
                                                        : fmt::format("max_num_pages={}", graph.max_num_pages)));
}
BatchPrefillWithPagedKVCacheWrapper::~BatchPrefillWithPagedKVCacheWrapper() = default;

namespace {

// The planner's shape of a paged batch (the page table checked); the pages it reaches (the largest id + 1) go to
// `extent`.
ops::BatchPrefillShape paged_shape(const std::vector<int32_t>& qo_indptr, const std::vector<int32_t>& paged_kv_indptr,
                                   const std::vector<int32_t>& paged_kv_indices,
                                   const std::vector<int32_t>& paged_kv_last_page_len, int num_qo_heads,
                                   int num_kv_heads, int head_dim, int page_size,
                                   const BatchPrefillPlanOptions& options, int64_t& extent) {
  if (page_size < 1) invalid(fmt::format("page_size={} is not allowed; it must be >= 1", page_size));
  if (qo_indptr.size() < 2)
    invalid(fmt::format("qo_indptr: {} entries is not allowed; it needs batch_size + 1 >= 2", qo_indptr.size()));
  const size_t batch = qo_indptr.size() - 1;
  ops::check_indptr(paged_kv_indptr, "paged_kv_indptr", batch, false);
  if (paged_kv_last_page_len.size() != batch)
    invalid(fmt::format("paged_kv_last_page_len: {} entries is not allowed; it must have batch_size = {}",
                        paged_kv_last_page_len.size(), batch));
  if (paged_kv_indices.size() < size_t(paged_kv_indptr.back()))
    invalid(fmt::format("paged_kv_indices: {} entries is not allowed; paged_kv_indptr[-1] = {} needs at least that many",
                        paged_kv_indices.size(), paged_kv_indptr.back()));
  ops::BatchPrefillShape s = base_shape(qo_indptr, num_qo_heads, num_kv_heads, head_dim, options);
  s.source = KVSource::Paged;
  s.num_page_indices = paged_kv_indices.size();
  int32_t max_page = -1;
  for (size_t b = 0; b < batch; ++b) {
    const int32_t pages = paged_kv_indptr[b + 1] - paged_kv_indptr[b], last = paged_kv_last_page_len[b];
    if (pages > 0 && (last < 1 || last > page_size))
      invalid(fmt::format("paged_kv_last_page_len[{}]={} is not allowed; it must be in [1, page_size={}]", b, last,
                          page_size));
    s.kv_lens.push_back(pages > 0 ? (pages - 1) * page_size + last : 0);
    for (int32_t i = paged_kv_indptr[b]; i < paged_kv_indptr[b + 1]; ++i) {
      if (paged_kv_indices[i] < 0)
        invalid(fmt::format("paged_kv_indices[{}]={} is not allowed; page ids must be >= 0", i, paged_kv_indices[i]));
      max_page = std::max(max_page, paged_kv_indices[i]);
    }
  }
  extent = int64_t(max_page) + 1;
  return s;
}

}  // namespace

void BatchPrefillWithPagedKVCacheWrapper::plan(const std::vector<int32_t>& qo_indptr,
                                               const std::vector<int32_t>& paged_kv_indptr,
                                               const std::vector<int32_t>& paged_kv_indices,
                                               const std::vector<int32_t>& paged_kv_last_page_len, int num_qo_heads,
                                               int num_kv_heads, int head_dim, int page_size,
                                               const BatchPrefillPlanOptions& options, Stream stream) {
  int64_t extent = 0;
  ops::BatchPrefillShape s = paged_shape(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
                                         num_qo_heads, num_kv_heads, head_dim, page_size, options, extent);
  impl_->core.plan(std::move(s), extent, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
                   options.custom_mask, stream);
  impl_->core.page_size = page_size;
}

WorkspaceSizes BatchPrefillWithPagedKVCacheWrapper::workspace_size(const std::vector<int32_t>& qo_indptr,
                                                                   const std::vector<int32_t>& paged_kv_indptr,
                                                                   const std::vector<int32_t>& paged_kv_indices,
                                                                   const std::vector<int32_t>& paged_kv_last_page_len,
                                                                   int num_qo_heads, int num_kv_heads, int head_dim,
                                                                   int page_size,
                                                                   const BatchPrefillPlanOptions& options) const {
  int64_t extent = 0;
  ops::BatchPrefillShape s = paged_shape(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
                                         num_qo_heads, num_kv_heads, head_dim, page_size, options, extent);
  return impl_->core.workspace_size(std::move(s), extent, options.custom_mask);
}

void BatchPrefillWithPagedKVCacheWrapper::run(const TensorView& q, const TensorView& k_cache,
                                              const TensorView& v_cache, const TensorView& o, const TensorView* lse,
                                              Stream stream) const {
  run(q, k_cache, v_cache, o, lse, std::nullopt, std::nullopt, stream);
}

void BatchPrefillWithPagedKVCacheWrapper::run(const TensorView& q, const TensorView& k_cache,
                                              const TensorView& v_cache, const TensorView& o, const TensorView* lse,
                                              std::optional<float> k_scale, std::optional<float> v_scale,
                                              Stream stream) const {
  const auto& c = impl_->core;
  kernels::PrefillParams p = c.params(q, o, lse, k_scale, v_scale);
  const int64_t P = k_cache.ndim == 4 ? k_cache.shape[0] : 0, S = c.page_size, Hk = c.shape.num_kv_heads,
                D = c.shape.head_dim;
  const bool nhd = c.kv_layout == KVLayout::NHD;
  // A vector, not an initializer_list: one kept in a variable outlives its array.
  const std::vector<int64_t> shape = nhd ? std::vector<int64_t>{P, S, Hk, D} : std::vector<int64_t>{P, Hk, S, D};
  ops::check_tensor(k_cache, "k_cache", c.shape.kv_dtype, c.device, shape, 16);
  ops::check_tensor(v_cache, "v_cache", c.shape.kv_dtype, c.device, shape, 16);
  c.check_kv_extent(P, "k_cache");
  p.kv.k = k_cache.data;
  p.kv.v = v_cache.data;
  p.kv.k_stride_page = k_cache.strides[0];
  p.kv.v_stride_page = v_cache.strides[0];
  p.kv.k_stride_row = nhd ? k_cache.strides[1] : k_cache.strides[2];
  p.kv.k_stride_head = nhd ? k_cache.strides[2] : k_cache.strides[1];
  p.kv.v_stride_row = nhd ? v_cache.strides[1] : v_cache.strides[2];
  p.kv.v_stride_head = nhd ? v_cache.strides[2] : v_cache.strides[1];
  p.kv.page_size = FastDivmod(static_cast<uint32_t>(c.page_size));
  p.kv.indices = c.array<const int32_t>("paged_kv_indices");
  p.kv.last_page_len = c.array<const int32_t>("paged_kv_last_page_len");
  // What the kernel's checks allow: ids of the cache's pages, indptr within
  // the indices the plan uploaded (the fixed buffer's, in CUDA-graph mode).
  p.kv.num_pages = static_cast<int32_t>(std::min(P, v_cache.ndim == 4 ? v_cache.shape[0] : P));
  p.kv.table_entries = c.graph ? c.graph->max_num_pages : static_cast<int64_t>(c.shape.num_page_indices);
  c.launch(p, o, stream);
}

void BatchPrefillWithPagedKVCacheWrapper::reset_workspace_buffer(void* workspace, size_t workspace_bytes) {
  impl_->core.reset_workspace(workspace, workspace_bytes);
}
void BatchPrefillWithPagedKVCacheWrapper::set_int_workspace(void* buffer, size_t bytes) {
  impl_->core.use_int_workspace(buffer, bytes);
}
size_t BatchPrefillWithPagedKVCacheWrapper::workspace_bytes() const {
  return impl_->core.planned ? impl_->core.layout.workspace.float_bytes() : 0;
}
size_t BatchPrefillWithPagedKVCacheWrapper::plan_memory_bytes() const { return impl_->core.plan_memory_bytes(); }
std::string BatchPrefillWithPagedKVCacheWrapper::describe() const { return impl_->core.describe(); }
void BatchPrefillWithPagedKVCacheWrapper::check() const { impl_->core.check(); }

}  // namespace attnjit

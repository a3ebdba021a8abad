// FlashInfer's BatchDecodeWithPagedKVCacheWrapper over BatchDecodePlan: it
// only turns the indptr / indices / last_page_len page table into lengths
// (for the partition) and device pointers (for the kernel).
#include <fmt/format.h>

#include <algorithm>

#include "arch.hpp"
#include "attnjit/batch_decode.hpp"
#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "engine.hpp"
#include "ops/attention_options/attention_options.hpp"
#include "ops/batch_decode/batch_decode_plan_internals.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"
#include "plan_memory.hpp"
#include "invalid_argument.hpp"

namespace attnjit {

struct BatchDecodeWithPagedKVCacheWrapper::Impl {
  const Runtime* rt;
  void* workspace;
  size_t workspace_bytes;
  KVLayout kv_layout;
  bool use_cuda_graph, use_tensor_cores;
  int32_t *fixed_indptr, *fixed_indices, *fixed_last;
  int max_batch;
  int64_t max_num_pages;
  int device;

  std::unique_ptr<BatchDecodePlan> plan;
  std::string plan_key;
  // Every plan's work list and, outside graph mode, the page table's device
  // copy: memory of the wrapper's own, kept across plans.
  std::shared_ptr<detail::PlanMemory> memory;
  // The page table on the device, as the last plan() placed it.
  const int32_t *indptr = nullptr, *indices = nullptr, *last_page_len = nullptr;
  int32_t max_page_id = -1;
  // The entries the device table may be read at (PagedKVView::table_entries):
  // the fixed buffer's in graph mode, where a captured run outlives its plan.
  int64_t table_entries = 0;
  // The last plan()'s variant, whose values run() packs: a plan kept for an
  // equal problem was made with an earlier Variant object of the same source.
  std::shared_ptr<const Variant> variant = nullptr;
};

BatchDecodeWithPagedKVCacheWrapper::BatchDecodeWithPagedKVCacheWrapper(
    const Runtime& rt, void* float_workspace_buffer, size_t workspace_bytes, KVLayout kv_layout, bool use_cuda_graph,
    bool use_tensor_cores, int32_t* paged_kv_indptr_buffer, int32_t* paged_kv_indices_buffer,
    int32_t* paged_kv_last_page_len_buffer, int max_batch_size, int64_t max_num_pages, int device)
    : impl_(std::make_unique<Impl>(Impl{&rt, float_workspace_buffer, workspace_bytes, kv_layout, use_cuda_graph,
                                        use_tensor_cores, paged_kv_indptr_buffer, paged_kv_indices_buffer,
                                        paged_kv_last_page_len_buffer, max_batch_size, max_num_pages, device, {}, {},
                                        std::make_shared<detail::PlanMemory>(device)})) {
  if (!float_workspace_buffer)
    throw Error(Status::InvalidArgument, "float_workspace_buffer is null; a device buffer is required");
  if (use_cuda_graph) {
    if (!paged_kv_indptr_buffer || !paged_kv_indices_buffer || !paged_kv_last_page_len_buffer)
      throw Error(Status::InvalidArgument,
                  "use_cuda_graph=true needs paged_kv_indptr_buffer, paged_kv_indices_buffer and "
                  "paged_kv_last_page_len_buffer (fixed device buffers the graph reads)");
    if (max_batch_size < 1)
      throw Error(Status::InvalidArgument,
                  fmt::format("max_batch_size={} is not allowed with use_cuda_graph=true; it must be >= 1 (the "
                              "indptr buffer holds max_batch_size + 1 entries)",
                              max_batch_size));
    if (max_num_pages < 1)
      throw Error(Status::InvalidArgument,
                  fmt::format("max_num_pages={} is not allowed with use_cuda_graph=true; it must be >= 1 (the "
                              "capacity of paged_kv_indices_buffer)",
                              max_num_pages));
  }
}

BatchDecodeWithPagedKVCacheWrapper::~BatchDecodeWithPagedKVCacheWrapper() = default;
BatchDecodeWithPagedKVCacheWrapper::BatchDecodeWithPagedKVCacheWrapper(BatchDecodeWithPagedKVCacheWrapper&&) noexcept =
    default;
BatchDecodeWithPagedKVCacheWrapper& BatchDecodeWithPagedKVCacheWrapper::operator=(
    BatchDecodeWithPagedKVCacheWrapper&&) noexcept = default;

void BatchDecodeWithPagedKVCacheWrapper::set_int_workspace(void* buffer, size_t bytes) {
  impl_->memory->borrow(buffer, bytes);
  impl_->plan.reset();  // plan() again: the old plan's data is in the old memory
  impl_->plan_key.clear();
}

void BatchDecodeWithPagedKVCacheWrapper::set_float_workspace(void* buffer, size_t bytes) {
  if (!buffer) throw Error(Status::InvalidArgument, "float_workspace_buffer is null; a device buffer is required");
  impl_->workspace = buffer;
  impl_->workspace_bytes = bytes;
}

size_t BatchDecodeWithPagedKVCacheWrapper::plan_memory_bytes() const { return impl_->plan ? impl_->memory->used() : 0; }

const BatchDecodePlan& BatchDecodeWithPagedKVCacheWrapper::current_plan() const {
  if (!impl_->plan) throw Error(Status::NotPlanned, "BatchDecodeWithPagedKVCacheWrapper: run() before plan()");
  return *impl_->plan;
}

void BatchDecodeWithPagedKVCacheWrapper::check() const {
  impl_->memory->table_check().check("a run before check()");
}

namespace {

// The page table's checks (all of them: it is on the host here) and the lengths it implies.
std::vector<int32_t> lengths_of(const std::vector<int32_t>& indptr, const std::vector<int32_t>& indices,
                                const std::vector<int32_t>& last_page_len, int page_size, int32_t& max_page_id) {
  if (indptr.size() < 2)
    invalid(fmt::format("indptr: size={} is not allowed; it must be batch_size + 1 >= 2", indptr.size()));
  const size_t batch = indptr.size() - 1;
  if (last_page_len.size() != batch)
    invalid(fmt::format("last_page_len: size={} is not allowed; it must be batch_size={} (indptr has {} entries)",
                        last_page_len.size(), batch, indptr.size()));
  if (indptr[0] != 0) invalid(fmt::format("indptr[0]={} is not allowed; it must be 0", indptr[0]));
  std::vector<int32_t> lens(batch);
  for (size_t b = 0; b < batch; ++b) {
    if (indptr[b + 1] < indptr[b])
      invalid(fmt::format("indptr[{}]={} is not allowed after indptr[{}]={}; indptr must not decrease", b + 1,
                          indptr[b + 1], b, indptr[b]));
    // A request without pages has no KV (o = 0, lse = -inf, as FlashInfer): its last_page_len is
    // not read, and may be 0 (FlashInfer's callers pass 0 or page_size there).
    const bool empty = indptr[b + 1] == indptr[b];
    if (last_page_len[b] < (empty ? 0 : 1) || last_page_len[b] > page_size)
      invalid(fmt::format("last_page_len[{}]={} is not allowed; allowed: {} to page_size={}", b, last_page_len[b],
                          empty ? "0 (a request without pages)" : "1", page_size));
    lens[b] = empty ? 0 : (indptr[b + 1] - indptr[b] - 1) * page_size + last_page_len[b];
  }
  if (size_t(indptr[batch]) != indices.size())  // plan() drops entries past indptr[batch_size] first
    invalid(fmt::format("indices: size={} is not allowed; it must be at least indptr[batch_size]={}", indices.size(),
                        indptr[batch]));
  max_page_id = -1;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0) invalid(fmt::format("indices[{}]={} is not allowed; page ids are >= 0", i, indices[i]));
    max_page_id = std::max(max_page_id, indices[i]);
  }
  return lens;
}

}  // namespace

// What plan() and workspace_size() share: the page table's checks, the
// lengths and the problem, for these arguments on this wrapper. Reads the
// wrapper, changes nothing.
struct BatchDecodeWithPagedKVCacheWrapper::Prepared {
  bool longer = false;           // the caller's indices run past indptr[batch_size]
  std::vector<int32_t> trimmed;  // then indices[0 .. indptr[batch_size])
  const std::vector<int32_t>& indices(const std::vector<int32_t>& given) const { return longer ? trimmed : given; }
  std::vector<int32_t> lens;
  int32_t max_page_id = -1;
  BatchDecodeProblem problem;
};

BatchDecodeWithPagedKVCacheWrapper::Prepared BatchDecodeWithPagedKVCacheWrapper::prepare(
    const std::vector<int32_t>& indptr, const std::vector<int32_t>& all_indices,
    const std::vector<int32_t>& last_page_len, const PlanArgs& a) const {
  const auto& I = *impl_;
  Prepared r;
  // FlashInfer reads indices[0 .. indptr[batch_size]) and lets the array be longer (vLLM and SGLang pass
  // their whole page buffer): the entries past it are neither checked nor uploaded.
  r.longer = indptr.size() >= 2 && indptr.back() >= 0 && size_t(indptr.back()) < all_indices.size();
  if (r.longer) r.trimmed.assign(all_indices.begin(), all_indices.begin() + indptr.back());
  const std::vector<int32_t>& indices = r.indices(all_indices);
  if (a.page_size < 1) invalid(fmt::format("page_size={} is not allowed; it must be >= 1", a.page_size));
  r.lens = lengths_of(indptr, indices, last_page_len, a.page_size, r.max_page_id);
  const int batch = static_cast<int>(r.lens.size());
  if (I.use_cuda_graph && batch > I.max_batch)
    invalid(fmt::format("indptr: batch_size={} is not allowed; this CUDA-graph wrapper holds at most "
                        "max_batch_size={}",
                        batch, I.max_batch));
  if (I.use_cuda_graph && int64_t(indices.size()) > I.max_num_pages)
    invalid(fmt::format("indices: size={} is not allowed; paged_kv_indices_buffer holds max_num_pages={}",
                        indices.size(), I.max_num_pages));

  BatchDecodeProblem& p = r.problem;
  p.batch_size = I.use_cuda_graph ? I.max_batch : batch;
  p.num_qo_heads = a.num_qo_heads;
  p.num_kv_heads = a.num_kv_heads;
  p.head_dim = a.head_dim;
  p.page_size = a.page_size;
  p.page_table = PageTable::IndptrIndices;
  p.host_lengths = true;
  p.q_dtype = p.o_dtype = a.q_data_type;
  p.kv_dtype = a.kv_data_type.value_or(a.q_data_type);
  p.device = I.device;
  auto& o = p.options;
  o.kv_layout = I.kv_layout;
  o.use_tensor_cores = I.use_tensor_cores;
  o.use_cuda_graph = I.use_cuda_graph;
  ops::copy_plan_args(a, o);
  return r;
}

WorkspaceSizes BatchDecodeWithPagedKVCacheWrapper::workspace_size(const std::vector<int32_t>& indptr,
                                                                  const std::vector<int32_t>& indices,
                                                                  const std::vector<int32_t>& last_page_len,
                                                                  const PlanArgs& args) const {
  const Prepared r = prepare(indptr, indices, last_page_len, args);
  const ops::BatchDecodeLayout layout = detail::BatchDecodePlanInternals::layout_for(*impl_->rt, r.problem);
  ops::partition_batch_decode(r.problem, layout, r.lens.data(), static_cast<int>(r.lens.size()));  // its checks
  WorkspaceSizes sizes;
  sizes.float_bytes = layout.workspace.float_bytes();
  // plan() uploads the page table after the work list, except in graph mode (the fixed buffers hold it).
  std::vector<size_t> arrays;
  if (!impl_->use_cuda_graph) arrays = {indptr.size(), last_page_len.size(), r.indices(indices).size()};
  detail::BatchDecodePlanInternals::array_offsets(layout.workspace, arrays, sizes.int_bytes);
  return sizes;
}

void BatchDecodeWithPagedKVCacheWrapper::plan(const std::vector<int32_t>& indptr, const std::vector<int32_t>& all_indices,
                                              const std::vector<int32_t>& last_page_len, const PlanArgs& a,
                                              Stream stream) {
  auto& I = *impl_;
  I.memory->table_check().raise_if_found("a run before this call");
  const Prepared r = prepare(indptr, all_indices, last_page_len, a);
  const std::vector<int32_t>& indices = r.indices(all_indices);
  const std::vector<int32_t>& lens = r.lens;
  const int batch = static_cast<int>(lens.size());
  const BatchDecodeProblem& p = r.problem;
  const std::string key = ops::to_json(p).dump();
  if (!I.plan || key != I.plan_key) {
    I.plan.reset();
    I.plan_key.clear();
    I.plan = std::make_unique<BatchDecodePlan>(*I.rt, p);  // validates; kernels are memoized by the engine
    detail::BatchDecodePlanInternals::share_memory(*I.plan, I.memory);
    I.plan_key = key;
  }
  // As FlashInfer's plan(): the scratch run() will need must fit the float workspace now.
  if (I.plan->workspace_bytes() > I.workspace_bytes) {
    const size_t need = I.plan->workspace_bytes();
    I.plan.reset();
    I.plan_key.clear();
    throw Error(Status::WorkspaceTooSmall,
                fmt::format("float_workspace_buffer: {} bytes are too few; this plan needs {} bytes of scratch",
                            I.workspace_bytes, need));
  }
  I.max_page_id = r.max_page_id;
  // The page table's device copy: the fixed buffers in graph mode (copied
  // here), else the wrapper's memory after the work list (the same upload).
  cuda::ScopedDevice scope(I.device);
  try {
    if (I.use_cuda_graph) {
      auto copy = [&](int32_t* dst, const std::vector<int32_t>& src) {
        if (!src.empty())
          ATTNJIT_CU(cuda::driver().MemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src.data(), src.size() * 4,
                                                    reinterpret_cast<CUstream>(stream)));
      };
      detail::PlanMemory::require_not_capturing(reinterpret_cast<CUstream>(stream), "plan()");
      copy(I.fixed_indptr, indptr);
      copy(I.fixed_last, last_page_len);
      copy(I.fixed_indices, indices);
      detail::BatchDecodePlanInternals::plan_with_arrays(*I.plan, lens.data(), batch, stream, {});
      I.indptr = I.fixed_indptr;
      I.indices = I.fixed_indices;
      I.last_page_len = I.fixed_last;
    } else {
      const auto placed = detail::BatchDecodePlanInternals::plan_with_arrays(*I.plan, lens.data(), batch, stream,
                                                                             {&indptr, &last_page_len, &indices});
      I.indptr = placed[0];
      I.last_page_len = placed[1];
      I.indices = placed[2];
    }
  } catch (...) {
    I.plan.reset();  // no half-planned wrapper: run() says NotPlanned
    I.plan_key.clear();
    throw;
  }
  I.table_entries = I.use_cuda_graph ? I.max_num_pages : int64_t(indices.size());
  I.variant = a.variant;
}

void BatchDecodeWithPagedKVCacheWrapper::run(const TensorView& q, const TensorView& k_cache,
                                             const TensorView& v_cache, const TensorView& out, const TensorView* lse,
                                             std::optional<float> k_scale, std::optional<float> v_scale,
                                             Stream stream, std::optional<bool> enable_pdl) const {
  const auto& I = *impl_;
  const BatchDecodePlan& plan = current_plan();
  if (k_cache.ndim == 4 && I.max_page_id >= k_cache.shape[0])
    invalid(fmt::format("indices: page id {} is not allowed; k_cache has {} pages (ids 0 to {})", I.max_page_id,
                        k_cache.shape[0], k_cache.shape[0] - 1));
  if (k_scale && !(*k_scale > 0.f)) invalid(fmt::format("k_scale={} is not allowed; it must be > 0", *k_scale));
  if (v_scale && !(*v_scale > 0.f)) invalid(fmt::format("v_scale={} is not allowed; it must be > 0", *v_scale));
  PagedKVView kv;
  kv.k_cache = k_cache;
  kv.v_cache = v_cache;
  kv.indptr = I.indptr;
  kv.indices = I.indices;
  kv.last_page_len = I.last_page_len;
  kv.table_entries = I.table_entries;
  BatchDecodeLaunchExtras extras;
  extras.enable_pdl = choose_pdl(I.rt->engine().arch_of(I.device), enable_pdl);
  extras.variant = I.variant.get();
  I.memory->retain_while_captured(stream);  // a captured graph outlives the wrapper
  detail::BatchDecodePlanInternals::run(plan, q, kv, out, lse, I.workspace, I.workspace_bytes, stream,
                                        k_scale.value_or(1.f), v_scale.value_or(1.f), extras,
                                        I.memory->table_check(), kernels::kNamesDecodeWrapper);
}

}  // namespace attnjit

// BatchDecodePlan: make the kernels ready (constructor), partition a batch
// and upload the work list (plan), fill params and launch (run).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "attnjit/batch_decode.hpp"
#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "decode_params.h"
#include "engine.hpp"
#include "launcher.hpp"
#include "merge_params.h"
#include "ops/attention_options/user_variant_options.hpp"
#include "ops/decode_choice.hpp"
#include "ops/batch_decode/batch_decode_plan_internals.hpp"
#include "ops/batch_decode/batch_decode_planner.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"
#include "ops/plan_fill.hpp"
#include "ops/tensor_checks.hpp"

namespace attnjit {

struct BatchDecodePlan::Impl {
  BatchDecodeProblem problem;
  ops::BatchDecodeLayout layout;
  ops::BatchDecodePartition partition;  // host_lengths: of the last plan()
  bool planned = false;
  std::shared_ptr<detail::Kernel> decode, merge;
  std::shared_ptr<detail::PlanMemory> memory;  // the work list and merge counters (the wrapper's, when shared)
  bool check_every_run = false;                // ATTNJIT_CHECK=1
};

BatchDecodePlan::BatchDecodePlan(const Runtime& rt, const BatchDecodeProblem& problem)
    : impl_(std::make_unique<Impl>()) {
  auto& engine = rt.engine();
  impl_->problem = problem;
  impl_->layout = detail::BatchDecodePlanInternals::layout_for(rt, problem);  // validates
  impl_->decode = engine.load_on_device(impl_->layout.decode.spec, problem.device);
  if (impl_->layout.merge) impl_->merge = engine.load_on_device(impl_->layout.merge->spec, problem.device);
  impl_->planned = !problem.host_lengths;  // the uniform partition is fixed by the problem
  impl_->memory = std::make_shared<detail::PlanMemory>(problem.device);
  impl_->check_every_run = engine.config().check_every_run;
}

BatchDecodePlan::~BatchDecodePlan() = default;
BatchDecodePlan::BatchDecodePlan(BatchDecodePlan&&) noexcept = default;
BatchDecodePlan& BatchDecodePlan::operator=(BatchDecodePlan&&) noexcept = default;

const BatchDecodeProblem& BatchDecodePlan::problem() const { return impl_->problem; }
size_t BatchDecodePlan::workspace_bytes() const { return impl_->layout.workspace.float_bytes(); }
size_t BatchDecodePlan::plan_memory_bytes() const { return impl_->layout.workspace.int_bytes(); }

void BatchDecodePlan::use_int_workspace(void* buffer, size_t bytes) {
  impl_->memory->borrow(buffer, bytes);
  impl_->planned = !impl_->problem.host_lengths;
}
int BatchDecodePlan::batch() const {
  return impl_->problem.host_lengths ? impl_->partition.batch : impl_->problem.batch_size;
}
int BatchDecodePlan::num_work_items() const {
  const auto& P = impl_->problem;
  if (!P.host_lengths || P.options.use_cuda_graph) return impl_->layout.max_items;
  return impl_->partition.num_items;
}
int BatchDecodePlan::chunk_size() const {
  return impl_->problem.host_lengths ? impl_->partition.chunk_size : impl_->layout.uniform_chunk;
}

std::string BatchDecodePlan::describe() const {
  const auto& L = impl_->layout;
  const auto& d = L.decode;
  return fmt::format("{} grid=({},{},{}) threads={} smem={} chunk={} items={} (max {}){}; {} workspace={} B",
                     d.spec.name(), d.shape.grid[0], d.shape.grid[1], num_work_items(), d.shape.threads,
                     d.shape.smem_bytes, chunk_size(), num_work_items(), L.max_items,
                     impl_->problem.options.use_cuda_graph ? " cuda-graph" : "",
                     L.merge ? L.merge->spec.name() : "no merge kernel", L.workspace.float_bytes());
}

namespace {

}  // namespace

void BatchDecodePlan::plan(const int32_t* kv_lens, int batch, Stream stream) {
  detail::BatchDecodePlanInternals::plan_with_arrays(*this, kv_lens, batch, stream, {});
}

namespace detail {

ops::BatchDecodeLayout BatchDecodePlanInternals::layout_for(const Runtime& rt, const BatchDecodeProblem& problem) {
  auto& engine = rt.engine();
  ops::DeviceFigures figures;
  figures.sm_count = engine.sm_count(problem.device);
  figures.smem_per_block = engine.smem_per_block(problem.device);
  return ops::plan_batch_decode(problem, figures);
}

std::vector<size_t> BatchDecodePlanInternals::array_offsets(const ops::WorkspaceLayout& ws,
                                                            const std::vector<size_t>& entries, size_t& total) {
  auto aligned = [](size_t x) { return (x + ops::WorkspaceLayout::kAlign - 1) / ops::WorkspaceLayout::kAlign *
                                       ops::WorkspaceLayout::kAlign; };
  std::vector<size_t> at;
  total = ws.int_bytes();
  for (const size_t n : entries) {
    at.push_back(total);
    total = aligned(total + n * sizeof(int32_t));
  }
  return at;
}

void BatchDecodePlanInternals::share_memory(BatchDecodePlan& plan, std::shared_ptr<PlanMemory> memory) {
  plan.impl_->memory = std::move(memory);
}

std::vector<const int32_t*> BatchDecodePlanInternals::plan_with_arrays(
    BatchDecodePlan& plan, const int32_t* kv_lens, int batch, Stream stream,
    const std::vector<const std::vector<int32_t>*>& arrays) {
  auto& I = *plan.impl_;
  if (!I.problem.host_lengths)
    throw Error(Status::InvalidArgument,
                "plan(kv_lens): this problem has host_lengths=false (lengths on the device); it needs no plan() call");
  const CUstream cu_stream = reinterpret_cast<CUstream>(stream);
  I.memory->table_check().raise_if_found("a run before this call");
  I.planned = false;
  I.partition = ops::partition_batch_decode(I.problem, I.layout, kv_lens, batch);
  cuda::ScopedDevice scope(I.problem.device);
  PlanMemory::require_not_capturing(cu_stream, "plan()");
  // One copy: the plan's regions ("merge_counters" zero before the first
  // run), then the caller's arrays.
  const auto& ws = I.layout.workspace;
  std::vector<size_t> entries;
  for (const auto* a : arrays) entries.push_back(a->size());
  size_t total = 0;
  const std::vector<size_t> at = array_offsets(ws, entries, total);
  I.memory->reserve(total, cu_stream);
  if (I.problem.options.use_cuda_graph) I.memory->freeze_address();
  uint8_t* host = I.memory->stage(total);
  std::memcpy(host + ws.region("work").offset, I.partition.items.data(),
              I.partition.items.size() * sizeof(kernels::DecodeWorkItem));
  std::memcpy(host + ws.region("merge_indptr").offset, I.partition.merge_indptr.data(),
              I.partition.merge_indptr.size() * sizeof(int32_t));
  std::vector<const int32_t*> placed;
  for (size_t i = 0; i < arrays.size(); ++i) {
    std::memcpy(host + at[i], arrays[i]->data(), arrays[i]->size() * sizeof(int32_t));
    // An empty array (indices of a batch whose requests have no KV) still gets a pointer, never read.
    placed.push_back(reinterpret_cast<const int32_t*>(I.memory->base() + at[i]));
  }
  I.memory->upload(cu_stream);
  I.planned = true;
  return placed;
}

void BatchDecodePlanInternals::run(const BatchDecodePlan& plan, const TensorView& q, const PagedKVView& kv,
                                   const TensorView& o, const TensorView* lse, void* workspace,
                                   size_t workspace_bytes, Stream stream, float k_scale, float v_scale,
                                   const BatchDecodeLaunchExtras& extras, TableCheck& check, int32_t names) {
  const auto& I = *plan.impl_;
  const auto& P = I.problem;
  const auto& L = I.layout;
  if (!I.planned) throw Error(Status::NotPlanned, "run() before plan(): this problem's lengths are on the host");
  check.raise_if_found("a run before this call");
  const auto batch = [&] { return plan.batch(); };
  const auto num_work_items = [&] { return plan.num_work_items(); };
  const int64_t B = batch(), H = P.num_qo_heads, Hk = P.num_kv_heads, D = P.head_dim, ps = P.page_size;
  const int kva = ops::decode_kv_align_bytes(*L.decode.spec.as<DecodeKernel>());
  const int64_t q_len = ops::max_query_tokens(P);
  const int64_t tokens = ops::query_token_rows(P, B, q.ndim >= 1 ? q.shape[0] : 0, extras.cum_seq_lens_q != nullptr);
  ops::check_tensor(q, "q", P.q_dtype, P.device, {tokens, H, D}, 16);
  ops::check_tensor(o, "out", P.o_dtype, P.device, {tokens, H, D}, 16);
  if (lse) ops::check_tensor(*lse, "lse", DType::F32, P.device, {tokens, H}, 4);
  if (lse && lse->strides[0] != H)
    throw Error(Status::InvalidArgument,
                fmt::format("lse: must be contiguous [{}, {}] (got {})", q_len > 1 ? "tokens" : "batch", H,
                            lse->describe()));
  const bool nhd = P.options.kv_layout == KVLayout::NHD;
  for (const auto* c : {&kv.k_cache, &kv.v_cache}) {
    const char* name = c == &kv.k_cache ? "k_cache" : "v_cache";
    if (c->ndim != 4)
      throw Error(Status::InvalidArgument,
                  fmt::format("{}: ndim={} is not allowed; allowed: 4, {} (got {})", name, c->ndim,
                              nhd ? "[pages, page_size, num_kv_heads, head_dim] for NHD"
                                  : "[pages, num_kv_heads, page_size, head_dim] for HND",
                              c->describe()));
    ops::check_tensor(*c, name, P.kv_dtype, P.device,
                      nhd ? std::initializer_list<int64_t>{c->shape[0], ps, Hk, D}
                          : std::initializer_list<int64_t>{c->shape[0], Hk, ps, D},
                      kva);
  }
  const bool indptr_table = P.page_table == PageTable::IndptrIndices;
  if (indptr_table && (!kv.indptr || !kv.indices || !kv.last_page_len))
    throw Error(Status::InvalidArgument, "kv: indptr, indices and last_page_len must all be set for PageTable::IndptrIndices");
  if (!indptr_table && (!kv.k_block_table || !kv.v_block_table || !kv.seq_lens || kv.block_table_stride < 1))
    throw Error(Status::InvalidArgument, fmt::format("kv: k_block_table, v_block_table, seq_lens and block_table_stride "
                                                     "(got {}) must all be set for PageTable::BlockTable",
                                                     kv.block_table_stride));
  ops::check_float_workspace(workspace, workspace_bytes, L.workspace.float_bytes());

  kernels::DecodeParams dp{};
  ops::set_outputs(dp, q, o, lse, workspace, L.workspace, L.workspace.has("partial_o"));
  const CUdeviceptr memory = I.memory->base();
  dp.work = P.host_lengths ? ops::plan_ptr<const kernels::DecodeWorkItem>(memory, L.workspace.region("work")) : nullptr;
  dp.q_stride_b = q.strides[0];
  dp.q_stride_h = q.strides[1];
  dp.o_stride_b = o.strides[0];
  dp.o_stride_h = o.strides[1];
  auto& s = dp.kv;
  s.k = kv.k_cache.data;
  s.v = kv.v_cache.data;
  s.k_stride_page = kv.k_cache.strides[0];
  s.v_stride_page = kv.v_cache.strides[0];
  s.k_stride_row = kv.k_cache.strides[nhd ? 1 : 2];
  s.v_stride_row = kv.v_cache.strides[nhd ? 1 : 2];
  s.k_stride_head = kv.k_cache.strides[nhd ? 2 : 1];
  s.v_stride_head = kv.v_cache.strides[nhd ? 2 : 1];
  s.page_size = FastDivmod(static_cast<uint32_t>(ps));
  s.indptr = kv.indptr;
  s.indices = kv.indices;
  s.last_page_len = kv.last_page_len;
  s.k_table = kv.k_block_table;
  s.v_table = kv.v_block_table;
  s.table_stride = kv.block_table_stride;
  s.seq_lens = kv.seq_lens;
  s.table_entries = kv.table_entries;  // 0 (unknown): no rows warmed (kernels/kv_source.cuh)
  s.num_pages = static_cast<int32_t>(std::min(kv.k_cache.shape[0], kv.v_cache.shape[0]));
  // The kernels check the tables against these (kernels/kv_source.cuh) and record a bad entry here.
  s.check = check.record();
  s.check_names = names;
  if (!indptr_table) {  // the longest seq_len a block table's row may have: the problem's and the table's bounds
    int64_t most = P.max_seq_len > 0 ? P.max_seq_len : std::numeric_limits<int32_t>::max();
    if (kv.table_entries > 0) most = std::min(most, kv.table_entries * ps);
    s.max_len = static_cast<int32_t>(std::min<int64_t>(most, std::numeric_limits<int32_t>::max()));
  }
  dp.var.sm_scale = L.sm_scale * k_scale;
  dp.var.v_scale = L.v_scale * v_scale;
  dp.var.soft_cap = L.soft_cap;
  dp.var.rope_rcp_scale = L.rope_rcp_scale;
  dp.var.rope_log2_theta = L.rope_log2_theta;
  dp.var.window_left = P.options.window_left;  // the kernel starts each item's rows at the window
  dp.var.sinks = extras.sinks;
  ops::pack_user_params(P.options.variant ? &P.options.variant->source() : nullptr,
                        extras.variant ? extras.variant : P.options.variant.get(), dp.var, P.device);
  dp.chunk_size = L.uniform_chunk;
  dp.num_splits = L.uniform_splits;
  dp.num_requests = static_cast<int32_t>(P.batch_size);
  dp.num_qo_heads = static_cast<int32_t>(H);
  dp.group_size = static_cast<int32_t>(H / Hk);
  dp.q_len = static_cast<int32_t>(q_len);
  dp.q_indptr = extras.cum_seq_lens_q;
  dp.q_rows = tokens;
  dp.q_row_offsets = extras.q_row_offsets;
  dp.o_row_offsets = extras.o_row_offsets;
  // A row at offset x spans x .. x + (H - 1) * stride(1) + D: inside the tensor while x <= (tokens - 1) * stride(0).
  dp.q_row_offset_max = (tokens - 1) * q.strides[0];
  dp.o_row_offset_max = (tokens - 1) * o.strides[0];
  dp.q_row_offset_step = static_cast<int32_t>(16 / dtype_size(P.q_dtype));
  dp.o_row_offset_step = static_cast<int32_t>(16 / dtype_size(P.o_dtype));
  dp.sm_scale_factor = extras.bmm1_scale;
  dp.v_scale_factor = extras.bmm2_scale;
  ops::check_draft_mask(P, extras.draft_mask, extras.draft_mask_row_words);
  dp.draft_mask = extras.draft_mask;
  dp.draft_mask_row_words = extras.draft_mask_row_words;
  dp.prefetch_rows = ops::batch_decode_warmed_rows(P, L, P.host_lengths ? I.partition.num_items : L.max_items);
  dp.prefetch_items = L.prefetch_items;
  if (P.host_lengths) {  // split requests merge in the decode kernel (kernels/decode_epilogue.cuh)
    dp.merge_counters = ops::plan_ptr<int32_t>(memory, L.workspace.region("merge_counters"));
    dp.merge_indptr = ops::plan_ptr<const int32_t>(memory, L.workspace.region("merge_indptr"));
  }

  ops::LaunchShape decode_shape = L.decode.shape;
  decode_shape.grid[2] = num_work_items();
  cuda::ScopedDevice scope(P.device);
  detail::launch(*I.decode, decode_shape, &dp, stream, extras.enable_pdl);
  // The lengths on the device: the uniform partition's splits, merged by
  // the merge kernel. (Its workspace, the caller's, has no plan() to zero
  // counters in: TensorRT-LLM's entry point plans nothing.)
  if (L.merge) {
    kernels::MergeParams mp{};
    mp.partial_o = dp.partial_o;
    mp.partial_lse = dp.partial_lse;
    mp.o = o.data;
    mp.lse = dp.lse;
    mp.sinks = extras.sinks;
    // A request's rows are its tokens x heads (kernels/merge_params.h).
    mp.heads_per_token = static_cast<int32_t>(H);
    mp.o_stride_token = o.strides[0];
    mp.o_stride_row = o.strides[1];
    mp.q_indptr = extras.cum_seq_lens_q;
    mp.q_rows = tokens;
    mp.o_token_offsets = extras.o_row_offsets;
    mp.o_token_offset_max = dp.o_row_offset_max;
    mp.o_token_offset_step = dp.o_row_offset_step;
    mp.q_token_offsets = extras.q_row_offsets;
    mp.q_token_offset_max = dp.q_row_offset_max;
    mp.q_token_offset_step = dp.q_row_offset_step;
    mp.num_splits = L.uniform_splits;
    mp.rows_per_request = static_cast<int32_t>(q_len * H);
    mp.num_rows = static_cast<int32_t>(L.merge->shape.grid[0]);  // every row of batch_size requests
    detail::launch(*I.merge, L.merge->shape, &mp, stream, extras.enable_pdl);
  }
  check.after_run(I.check_every_run, reinterpret_cast<CUstream>(stream));
}

}  // namespace detail

void BatchDecodePlan::run(const TensorView& q, const PagedKVView& kv, const TensorView& o, const TensorView* lse,
                          void* workspace, size_t workspace_bytes, Stream stream, float k_scale,
                          float v_scale, const BatchDecodeLaunchExtras& extras) const {
  const int32_t names = impl_->problem.page_table == PageTable::IndptrIndices ? kernels::kNamesDecodePlan
                                                                              : kernels::kNamesBlockTable;
  impl_->memory->retain_while_captured(stream);  // a captured graph outlives the plan
  detail::BatchDecodePlanInternals::run(*this, q, kv, o, lse, workspace, workspace_bytes, stream, k_scale, v_scale,
                                        extras, impl_->memory->table_check(), names);
}

void BatchDecodePlan::check() const { impl_->memory->table_check().check("a run before check()"); }

std::pair<TensorView, TensorView> kv_cache_halves(void* data, DType dtype, const int64_t (&shape)[5],
                                                  const int64_t (&strides)[5], int device) {
  if (shape[1] != 1 && shape[1] != 2)
    throw Error(Status::InvalidArgument,
                fmt::format("kv_cache: shape[1]={} is not allowed; allowed: 2 ([pages, 2, ...]: K then V) or 1 (K "
                            "and V are the same tensor)",
                            shape[1]));
  TensorView k;
  k.data = data;
  k.dtype = dtype;
  k.ndim = 4;
  k.device = device;
  for (int i = 0; i < 4; ++i) {
    k.shape[i] = shape[i == 0 ? 0 : i + 1];
    k.strides[i] = strides[i == 0 ? 0 : i + 1];
  }
  TensorView v = k;
  if (shape[1] == 2) v.data = static_cast<char*>(data) + strides[1] * int64_t(dtype_size(dtype));
  return {k, v};
}

size_t batch_decode_workspace_bytes(const Runtime& rt, const BatchDecodeProblem& problem) {
  return detail::BatchDecodePlanInternals::layout_for(rt, problem).workspace.float_bytes();
}

}  // namespace attnjit

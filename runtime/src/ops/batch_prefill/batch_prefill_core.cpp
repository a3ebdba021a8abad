#include "ops/batch_prefill/batch_prefill_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <string_view>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "launcher.hpp"
#include "ops/plan_fill.hpp"
#include "ops/prefill_launch.hpp"
#include "merge_params.h"
#include "block_mask_params.h"
#include "ops/attention_options/prefill_options.hpp"
#include "ops/attention_options/user_variant_options.hpp"
#include "ops/tensor_checks.hpp"
#include "invalid_argument.hpp"

namespace attnjit::ops {

namespace {

// Every request's block of FlashInfer's flattened mask, packed from a byte
// boundary (the kernel finds request b's block at byte offsets[b]).
std::vector<uint8_t> pack_segments(const std::vector<bool>& mask, const std::vector<int32_t>& qo_indptr,
                                   const std::vector<int32_t>& kv_lens, std::vector<int32_t>& offsets) {
  const size_t batch = kv_lens.size();
  size_t want = 0;
  for (size_t b = 0; b < batch; ++b) want += size_t(qo_indptr[b + 1] - qo_indptr[b]) * size_t(kv_lens[b]);
  if (mask.size() != want)
    invalid(fmt::format("custom_mask: {} entries is not allowed; it must have sum(qo_len * kv_len) = {} (each "
                        "request's [qo_len, kv_len] block, flattened)",
                        mask.size(), want));
  std::vector<uint8_t> out;
  offsets.assign(batch, 0);
  size_t at = 0;
  for (size_t b = 0; b < batch; ++b) {
    const size_t n = size_t(qo_indptr[b + 1] - qo_indptr[b]) * size_t(kv_lens[b]);
    offsets[b] = static_cast<int32_t>(out.size());
    out.resize(out.size() + (n + 7) / 8, 0);
    for (size_t i = 0; i < n; ++i)
      if (mask[at + i]) out[offsets[b] + i / 8] |= uint8_t(1u << (i % 8));
    at += n;
  }
  return out;
}

}  // namespace

BatchPrefillCore::BatchPrefillCore(const Runtime& r, void* ws, size_t ws_bytes, KVLayout layout_, std::string backend_,
                                   int dev, std::optional<BatchPrefillCudaGraphBuffers> graph_)
    : rt(&r), workspace(ws), workspace_bytes(ws_bytes), kv_layout(layout_), backend(std::move(backend_)), device(dev),
      graph(std::move(graph_)), memory(std::make_unique<detail::PlanMemory>(dev)) {
  PrefillOptions o;
  o.backend = backend;
  validate_prefill_options(o);  // "fa3" and unknown backends fail at construction, as in FlashInfer
  if (graph) {
    const auto& g = *graph;
    if (g.max_batch_size < 1)
      invalid(fmt::format("max_batch_size={} is not allowed with use_cuda_graph=true; allowed: >= 1 (qo_indptr_buf "
                          "holds max_batch_size + 1 entries)",
                          g.max_batch_size));
    if (!g.qo_indptr || !g.kv_indptr)
      invalid(fmt::format("{}: is null; use_cuda_graph=true needs the fixed qo_indptr_buf and kv_indptr_buf "
                          "(paged_kv_indptr_buf) device buffers of max_batch_size + 1 int32",
                          g.qo_indptr ? "kv_indptr_buf" : "qo_indptr_buf"));
    if (bool(g.custom_mask) != bool(g.qk_indptr))
      invalid(fmt::format("{}: is null while {} is given; allowed: both (plans with a custom mask) or neither",
                          g.custom_mask ? "qk_indptr_buf" : "custom_mask_buf",
                          g.custom_mask ? "custom_mask_buf" : "qk_indptr_buf"));
  }
}

template <class T>
T* BatchPrefillCore::array(const char* name) const {
  if (graph) {
    const std::string_view n = name;
    void* p = n == "qo_indptr"                ? static_cast<void*>(graph->qo_indptr)
              : n == "kv_indptr"              ? graph->kv_indptr
              : n == "paged_kv_indices"       ? graph->paged_kv_indices
              : n == "paged_kv_last_page_len" ? graph->paged_kv_last_page_len
              : n == "mask"                   ? static_cast<void*>(graph->custom_mask)
              : n == "mask_indptr"            ? graph->qk_indptr
                                              : nullptr;
    if (p) return static_cast<T*>(p);
  }
  return plan_ptr<T>(memory->base(), layout.workspace.region(name));
}
template int32_t* BatchPrefillCore::array<int32_t>(const char*) const;
template const int32_t* BatchPrefillCore::array<const int32_t>(const char*) const;
template const uint8_t* BatchPrefillCore::array<const uint8_t>(const char*) const;

void BatchPrefillCore::require_planned(const char* what) const {
  if (!planned) throw Error(Status::NotPlanned, fmt::format("{}: call plan() first", what));
}

BatchPrefillCore::Prepared BatchPrefillCore::prepare(BatchPrefillShape s, int64_t extent,
                                                     const std::vector<bool>& custom_mask) const {
  Prepared r;
  s.options.backend = backend;
  s.options.kv_layout = kv_layout;
  if (s.options.custom_mask) {
    r.packed_mask = pack_segments(custom_mask, s.qo_indptr, s.kv_lens, r.mask_offsets);
    s.mask_bytes = r.packed_mask.size();
  }
  // A run() may have been captured: later plans keep its kernel.
  const std::optional<KernelSpec> captured =
      graph && graph_q_rows >= 0 && planned_once ? std::optional<KernelSpec>(layout.prefill.spec) : std::nullopt;
  if (graph) {
    s.graph_max_batch = graph->max_batch_size;
    if (captured) s.graph_frags_m = captured->as<PrefillKernel>()->frags_m;
    check_graph_plan(s, extent);
  }
  validate_batch_prefill(s);
  r.layout = plan_batch_prefill(s, device_figures(*rt, device));
  if (captured && r.layout.prefill.spec.name() != captured->name())
    invalid(fmt::format("plan(): the kernel would change from {} to {} (mask, positional encoding, soft cap, window or "
                        "dtypes differ) after a run() of this wrapper with use_cuda_graph=true, which a CUDA graph "
                        "may have captured and would replay with the old kernel; allowed: the same options, or a "
                        "new wrapper for the new ones",
                        captured->name(), r.layout.prefill.spec.name()));
  r.shape = std::move(s);
  return r;
}

WorkspaceSizes BatchPrefillCore::workspace_size(BatchPrefillShape s, int64_t extent,
                                                const std::vector<bool>& custom_mask) const {
  const Prepared r = prepare(std::move(s), extent, custom_mask);
  return {r.layout.workspace.float_bytes(), r.layout.workspace.int_bytes()};
}

void BatchPrefillCore::plan(BatchPrefillShape shape_in, int64_t extent, const std::vector<int32_t>& kv_indptr,
                            const std::vector<int32_t>& page_indices, const std::vector<int32_t>& last_page_len,
                            const std::vector<bool>& custom_mask, Stream stream) {
  memory->table_check().raise_if_found("a run before this call");
  planned = false;
  const CUstream cu_stream = reinterpret_cast<CUstream>(stream);
  Prepared r = prepare(std::move(shape_in), extent, custom_mask);
  BatchPrefillShape& s = r.shape;
  BatchPrefillLayout& L = r.layout;
  const std::vector<uint8_t>& packed = r.packed_mask;
  const std::vector<int32_t>& mask_offsets = r.mask_offsets;
  auto& engine = rt->engine();
  const size_t need = L.workspace.float_bytes();
  if (need > 0 && (!workspace || workspace_bytes < need))
    throw Error(Status::WorkspaceTooSmall,
                fmt::format("float_workspace_buffer: {} bytes are too few; this plan ({} work items, {} KV chunks) "
                            "needs {} bytes of scratch",
                            workspace ? workspace_bytes : 0, L.num_work, L.num_chunks, need));
  if (reinterpret_cast<uintptr_t>(workspace) % WorkspaceLayout::kAlign != 0)
    invalid("float_workspace_buffer must be 256-byte aligned");
  // The arguments are valid: from here on the device.
  cuda::ScopedDevice scope(device);
  detail::PlanMemory::require_not_capturing(cu_stream, "plan()");
  prefill = engine.load_on_device(L.prefill.spec, device);
  merge = L.merge ? engine.load_on_device(L.merge->spec, device) : nullptr;
  block_mask = L.block_mask ? engine.load_on_device(L.block_mask->spec, device) : nullptr;
  if (L.block_mask) {
    if (!kept_classes) kept_classes = std::make_unique<BlockMaskKeep>(device);
    kept_classes->resize(L.workspace.region("block_mask").bytes);  // the new rows: every kept copy is stale
  }

  memory->reserve(L.workspace.int_bytes(), cu_stream);
  if (graph) memory->freeze_address();  // a captured run reads the tile counts there
  uint8_t* host = memory->stage(L.workspace.int_bytes());
  // Into the plan memory's staging, or (CUDA-graph mode, the caller's fixed
  // buffers) straight to the device: a copy from pageable memory has read it
  // when the call returns.
  auto put = [&](const char* name, const void* src, size_t bytes) {
    if (bytes == 0) return;
    const bool fixed = graph && !L.workspace.has(name);
    if (fixed) {
      ATTNJIT_CU(cuda::driver().MemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(array<char>(name)), src, bytes,
                                                cu_stream));
    } else {
      std::memcpy(host + L.workspace.region(name).offset, src, bytes);
    }
  };
  if (graph) {
    put("tile_indptr", L.tile_indptr.data(), L.tile_indptr.size() * sizeof(int32_t));
    // "work_counter": zero (staged zeros); the kernel's last CTA keeps it zero after.
  } else {
    put("work", L.work.data(), L.work.size() * sizeof(int32_t));
  }
  put("qo_indptr", s.qo_indptr.data(), s.qo_indptr.size() * sizeof(int32_t));
  put("kv_indptr", kv_indptr.data(), kv_indptr.size() * sizeof(int32_t));
  if (s.source == KVSource::Paged) {
    put("paged_kv_indices", page_indices.data(), page_indices.size() * sizeof(int32_t));
    put("paged_kv_last_page_len", last_page_len.data(), last_page_len.size() * sizeof(int32_t));
  }
  if (s.options.custom_mask) {
    put("mask", packed.data(), packed.size());
    put("mask_indptr", mask_offsets.data(), mask_offsets.size() * sizeof(int32_t));
  }
  if (L.block_mask) {
    put("block_mask_rows", L.block_mask_rows.data(), L.block_mask_rows.size() * sizeof(int32_t));
    put("block_mask_row_indptr", L.block_mask_row_indptr.data(), L.block_mask_row_indptr.size() * sizeof(int32_t));
  }
  memory->upload(cu_stream);
  layout = std::move(L);
  shape = std::move(s);
  kv_extent = extent;
  planned = planned_once = true;
}

void BatchPrefillCore::check_graph_plan(const BatchPrefillShape& s, int64_t extent) const {
  const auto& g = *graph;
  if (s.source == KVSource::Paged && s.num_page_indices > size_t(g.max_num_pages))
    invalid(fmt::format("paged_kv_indices: {} entries is not allowed with use_cuda_graph=true; allowed: at most {} "
                        "(paged_kv_indices_buf's size)",
                        s.num_page_indices, g.max_num_pages));
  if (s.options.custom_mask) {
    if (!g.custom_mask)
      invalid("custom_mask: is given but the wrapper has no custom_mask_buf; allowed: no custom mask, or a wrapper "
              "made with custom_mask_buf and qk_indptr_buf");
    if (s.mask_bytes > size_t(g.custom_mask_bytes))
      invalid(fmt::format("custom_mask: {} packed bytes is not allowed with use_cuda_graph=true; allowed: at most {} "
                          "(custom_mask_buf's size)",
                          s.mask_bytes, g.custom_mask_bytes));
  }
  // A captured run keeps the tensors it was given: a plan past them would
  // make its replay read and write outside them.
  const int64_t nnz = s.qo_indptr.empty() ? 0 : s.qo_indptr.back();
  if (graph_q_rows >= 0 && nnz > graph_q_rows)
    invalid(fmt::format("qo_indptr[-1]={} is not allowed with use_cuda_graph=true: a run() of this wrapper (which a "
                        "CUDA graph may have captured) was given q with {} rows; allowed: <= {}",
                        nnz, graph_q_rows, graph_q_rows));
  if (graph_kv_extent >= 0 && extent > graph_kv_extent) {
    const bool paged = s.source == KVSource::Paged;
    invalid(fmt::format("{}={} is not allowed with use_cuda_graph=true: a run() of this wrapper (which a CUDA graph "
                        "may have captured) was given {} {}; allowed: <= {}",
                        paged ? "paged_kv_indices: the largest page id + 1" : "kv_indptr[-1]", extent,
                        paged ? "k_cache with" : "k with", graph_kv_extent, paged ? "pages" : "rows"));
  }
}

void BatchPrefillCore::check_kv_extent(int64_t given, const char* arg) const {
  const bool paged = shape.source == KVSource::Paged;
  if (paged ? given < kv_extent : graph ? given < kv_extent : given != kv_extent)
    invalid(fmt::format("{}: {} {} is not allowed; the plan reads {} {}{}", arg, given, paged ? "pages" : "rows",
                        paged ? "pages up to id" : "rows:", paged ? kv_extent - 1 : kv_extent,
                        paged ? "" : graph ? " (at least that many with use_cuda_graph=true)" : " (kv_indptr[-1])"));
  if (graph) graph_kv_extent = graph_kv_extent < 0 ? given : std::min(graph_kv_extent, given);
}

kernels::PrefillParams BatchPrefillCore::params(const TensorView& q, const TensorView& o, const TensorView* lse,
                                                std::optional<float> k_scale, std::optional<float> v_scale) const {
  require_planned("run");
  memory->table_check().raise_if_found("a run before this call");
  for (auto [value, name] : {std::pair{k_scale, "k_scale"}, std::pair{v_scale, "v_scale"}})
    if (value && !(std::isfinite(*value) && *value > 0.f))
      invalid(fmt::format("{}={} is not allowed; allowed: a finite value > 0 (or none: 1)", name, *value));
  const int64_t nnz = shape.qo_indptr.back(), H = shape.num_qo_heads, D = shape.head_dim;
  // CUDA-graph mode: q may have more rows than this plan uses (a later plan may use them).
  const int64_t rows = graph && q.ndim == 3 && q.shape[0] >= nnz ? q.shape[0] : nnz;
  check_tensor(q, "q", shape.q_dtype, device, {rows, H, D}, 16);
  check_tensor(o, "o", prefill_o_dtype(shape.options, shape.q_dtype), device, {rows, H, D}, 16);
  if (rows > 1 && o.strides[0] != H * o.strides[1])
    invalid(fmt::format("o: stride(0)={} is not allowed; rows must be contiguous, stride(0) = num_qo_heads * "
                        "stride(1) = {}",
                        o.strides[0], H * o.strides[1]));
  if (lse) {
    check_tensor(*lse, "lse", DType::F32, device, {rows, H}, 4);
    if (rows > 1 && lse->strides[0] != H) invalid("lse: must be contiguous [nnz_qo, num_qo_heads]");
  }
  if (graph) graph_q_rows = graph_q_rows < 0 ? rows : std::min(graph_q_rows, rows);
  kernels::PrefillParams p{};
  set_prefill_outputs(p, q, o, lse, workspace, layout.workspace, layout.num_chunks > 1);
  p.var = layout.var;
  p.var.sm_scale *= k_scale.value_or(1.f);
  p.var.v_scale *= v_scale.value_or(1.f);
  const auto& variant = shape.options.variant;  // its values as bound now
  pack_user_params(variant ? &variant->source() : nullptr, variant.get(), p.var, device);
  if (shape.options.custom_mask) {
    p.var.custom_mask = array<const uint8_t>("mask");
    p.var.custom_mask_indptr = array<const int32_t>("mask_indptr");
  }
  p.qo_indptr = array<const int32_t>("qo_indptr");
  // What the kernels check qo_indptr against (prefill_schedule.cuh).
  p.q_rows = static_cast<int32_t>(std::min<int64_t>(rows, std::numeric_limits<int32_t>::max()));
  if (graph) {
    p.tile_indptr = array<const int32_t>("tile_indptr");
    p.work_counter = array<int32_t>("work_counter");
    p.batch_size = graph->max_batch_size;
  } else {
    p.work = array<const int32_t>("work");
  }
  p.num_work = layout.num_work;
  p.num_qo_heads = static_cast<int32_t>(H);
  p.group = FastDivmod(static_cast<uint32_t>(shape.num_qo_heads / shape.num_kv_heads));
  p.chunk_size = layout.chunk_size;
  p.num_chunks = layout.num_chunks;
  p.num_rows = static_cast<int32_t>(nnz * H);
  p.kv.indptr = array<const int32_t>("kv_indptr");
  // The kernels check qo_indptr and the KV source's tables (kernels/kv_source.cuh) and record a bad entry here.
  p.kv.check = memory->table_check().record();
  p.kv.check_names = shape.source == KVSource::Paged ? kernels::kNamesPrefill : kernels::kNamesRaggedPrefill;
  return p;
}

void BatchPrefillCore::launch(const kernels::PrefillParams& params, const TensorView& o, Stream stream) const {
  cuda::ScopedDevice scope(device);
  // No query rows at all; a graph-mode launch runs anyway, as a later plan's replay needs it.
  if (layout.num_work == 0 && !graph) return;
  memory->retain_while_captured(stream);  // a captured graph outlives the plan
  kernels::PrefillParams p = params;
  BlockMaskKeep::Use kept;
  if (layout.block_mask) {
    // The classes of the values bound now, before the kernel that walks them (same stream): into the
    // scratch workspace, or under on_bind kept from an earlier run of these values since this plan().
    const Variant& v = *shape.options.variant;
    if (v.source().reclassify == Reclassify::OnBind) kept = kept_classes->use(stream, v.values_version());
    const int64_t rows = layout.block_mask_row_indptr.back(), slots = layout.block_mask_slots;
    int32_t* region = kept.kept() ? kept.kept() : scratch_ptr<int32_t>(workspace, layout.workspace.region("block_mask"));
    const auto& k = *layout.prefill.spec.as<PrefillKernel>();
    kernels::BlockMaskParams bp{};
    bp.counts = region;
    bp.tiles = region + rows * slots;
    bp.row_requests = array<const int32_t>("block_mask_rows");
    bp.stride = layout.block_mask_stride;
    bp.slots = static_cast<int32_t>(slots);
    bp.tile_q = k.tile_q();
    bp.tile_kv = k.tile_kv();
    bp.heads_vary = v.source().heads_vary ? 1 : 0;
    bp.group = p.group;
    std::memcpy(bp.user_params, p.var.user_params, sizeof(bp.user_params));
    if (rows > 0 && kept.classify()) detail::launch(*block_mask, layout.block_mask->shape, &bp, stream);
    kernels::block_tiles(p.var) = {bp.tiles, bp.counts, array<const int32_t>("block_mask_row_indptr"), bp.stride,
                                   bp.slots};
  }
  launch_prefill(*prefill, layout.prefill.shape, p, stream);
  if (layout.merge) {
    const kernels::MergeParams mp = packed_split_merge({p.partial_o, p.partial_lse}, o, p.lse, o.strides[1], p.num_rows,
                                                       layout.num_chunks);
    detail::launch(*merge, layout.merge->shape, &mp, stream);
  }
  kept.launched();
  memory->table_check().after_run(rt->engine().config().check_every_run, reinterpret_cast<CUstream>(stream));
}

void BatchPrefillCore::check() const { memory->table_check().check("a run before check()"); }

void BatchPrefillCore::reset_workspace(void* ws, size_t bytes) {
  if (planned && layout.workspace.float_bytes() > bytes)
    throw Error(Status::WorkspaceTooSmall,
                fmt::format("float_workspace_buffer: {} bytes are too few; the current plan needs {} bytes of scratch",
                            bytes, layout.workspace.float_bytes()));
  workspace = ws;
  workspace_bytes = bytes;
}

void BatchPrefillCore::use_int_workspace(void* buffer, size_t bytes) {
  memory->borrow(buffer, bytes);
  planned = planned_once = false;
  graph_q_rows = graph_kv_extent = -1;
}

std::string BatchPrefillCore::describe() const {
  if (!planned) return "not planned";
  const auto& k = layout.prefill;
  return fmt::format("{}{} work={} grid={} chunks={} chunk={} workspace={} B plan_memory={} B{}{}", k.spec.name(),
                     graph ? " cuda-graph" : "", layout.num_work, k.shape.grid[0], layout.num_chunks,
                     layout.chunk_size, layout.workspace.float_bytes(), layout.workspace.int_bytes(),
                     layout.merge ? "; " + layout.merge->spec.name() : "",
                     layout.block_mask ? fmt::format("; {} grid=({},{}) first, block_mask {} B of the workspace",
                                                     layout.block_mask->spec.name(), layout.block_mask->shape.grid[0],
                                                     layout.block_mask->shape.grid[1],
                                                     layout.workspace.region("block_mask").bytes)
                                       : "");
}

}  // namespace attnjit::ops

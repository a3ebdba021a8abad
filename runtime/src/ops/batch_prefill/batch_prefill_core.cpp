#include "ops/batch_prefill/batch_prefill_core.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "launcher.hpp"
#include "merge_params.h"
#include "ops/single_prefill/prefill_options.hpp"
#include "ops/tensor_checks.hpp"

namespace attnjit::ops {

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw Error(Status::InvalidArgument, msg); }

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
                                   int dev)
    : rt(&r), workspace(ws), workspace_bytes(ws_bytes), kv_layout(layout_), backend(std::move(backend_)), device(dev) {
  PrefillOptions o;
  o.backend = backend;
  validate_prefill_options(o);  // "fa3" and unknown backends fail at construction, as in FlashInfer
}

void BatchPrefillCore::require_planned(const char* what) const {
  if (!planned) throw Error(Status::NotPlanned, fmt::format("{}: call plan() first", what));
}

void BatchPrefillCore::plan(BatchPrefillShape s, const std::vector<int32_t>& kv_indptr,
                            const std::vector<int32_t>& page_indices, const std::vector<int32_t>& last_page_len,
                            const std::vector<bool>& custom_mask, Stream stream) {
  planned = false;
  s.options.backend = backend;
  s.options.kv_layout = kv_layout;
  std::vector<int32_t> mask_offsets;
  std::vector<uint8_t> packed;
  if (s.options.custom_mask) {
    packed = pack_segments(custom_mask, s.qo_indptr, s.kv_lens, mask_offsets);
    s.mask_bytes = packed.size();
  }
  validate_batch_prefill(s);
  auto& engine = rt->engine();
  DeviceFigures figures;
  figures.sm_count = engine.sm_count(device);
  BatchPrefillLayout L = plan_batch_prefill(s, figures);
  const size_t need = L.workspace.total_bytes();
  if (!workspace || workspace_bytes < need)
    throw Error(Status::WorkspaceTooSmall,
                fmt::format("workspace_bytes={} is too small; this plan ({} work items, {} KV chunks) needs {} bytes",
                            workspace ? workspace_bytes : 0, L.num_work, L.num_chunks, need));
  if (reinterpret_cast<uintptr_t>(workspace) % WorkspaceLayout::kAlign != 0)
    invalid("workspace must be 256-byte aligned");
  prefill = engine.load_on_device(L.prefill.spec, device);
  merge = L.merge ? engine.load_on_device(L.merge->spec, device) : nullptr;

  cuda::ScopedDevice scope(device);
  const auto& cu = cuda::driver();
  auto upload = [&](const char* region, const void* src, size_t bytes) {
    if (bytes == 0) return;
    ATTNJIT_CU(cu.MemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(region_ptr<char>(workspace, L.workspace.region(region))),
                                  src, bytes, stream));
  };
  upload("work", L.work.data(), L.work.size() * sizeof(int32_t));
  upload("qo_indptr", s.qo_indptr.data(), s.qo_indptr.size() * sizeof(int32_t));
  upload("kv_indptr", kv_indptr.data(), kv_indptr.size() * sizeof(int32_t));
  if (s.source == KVSource::Paged) {
    upload("paged_kv_indices", page_indices.data(), page_indices.size() * sizeof(int32_t));
    upload("paged_kv_last_page_len", last_page_len.data(), last_page_len.size() * sizeof(int32_t));
  }
  if (s.options.custom_mask) {
    upload("mask", packed.data(), packed.size());
    upload("mask_indptr", mask_offsets.data(), mask_offsets.size() * sizeof(int32_t));
  }
  // Pageable host memory: the driver has staged the bytes when each call returns.
  shape = std::move(s);
  layout = std::move(L);
  planned = true;
}

kernels::PrefillParams BatchPrefillCore::params(const TensorView& q, const TensorView& o, const TensorView* lse) const {
  require_planned("run");
  const int64_t nnz = shape.qo_indptr.back(), H = shape.num_qo_heads, D = shape.head_dim;
  check_tensor(q, "q", shape.q_dtype, device, {nnz, H, D}, 16);
  check_tensor(o, "o", shape.q_dtype, device, {nnz, H, D}, 16);
  if (nnz > 1 && o.strides[0] != H * o.strides[1])
    invalid(fmt::format("o: stride(0)={} is not allowed; rows must be contiguous, stride(0) = num_qo_heads * "
                        "stride(1) = {}",
                        o.strides[0], H * o.strides[1]));
  if (lse) {
    check_tensor(*lse, "lse", DType::F32, device, {nnz, H}, 4);
    if (nnz > 1 && lse->strides[0] != H) invalid("lse: must be contiguous [nnz_qo, num_qo_heads]");
  }
  kernels::PrefillParams p{};
  p.q = q.data;
  p.o = o.data;
  p.lse = lse ? static_cast<float*>(lse->data) : nullptr;
  const bool split = layout.num_chunks > 1;
  p.partial_o = split ? region_ptr<float>(workspace, layout.workspace.region("partial_o")) : nullptr;
  p.partial_lse = split ? region_ptr<float>(workspace, layout.workspace.region("partial_lse")) : nullptr;
  p.q_stride_n = q.strides[0];
  p.q_stride_h = q.strides[1];
  p.o_stride_n = o.strides[0];
  p.o_stride_h = o.strides[1];
  p.var = layout.var;
  if (shape.options.custom_mask) {
    p.var.custom_mask = region_ptr<const uint8_t>(workspace, layout.workspace.region("mask"));
    p.var.custom_mask_indptr = region_ptr<const int32_t>(workspace, layout.workspace.region("mask_indptr"));
  }
  p.qo_indptr = region_ptr<const int32_t>(workspace, layout.workspace.region("qo_indptr"));
  p.work = region_ptr<const int32_t>(workspace, layout.workspace.region("work"));
  p.num_work = layout.num_work;
  p.num_qo_heads = static_cast<int32_t>(H);
  p.group_size = shape.num_qo_heads / shape.num_kv_heads;
  p.chunk_size = layout.chunk_size;
  p.num_chunks = layout.num_chunks;
  p.num_rows = static_cast<int32_t>(nnz * H);
  p.kv.indptr = region_ptr<const int32_t>(workspace, layout.workspace.region("kv_indptr"));
  return p;
}

void BatchPrefillCore::launch(const kernels::PrefillParams& p, const TensorView& o, Stream stream) const {
  cuda::ScopedDevice scope(device);
  if (layout.num_work == 0) return;  // no query rows at all
  detail::launch(*prefill, layout.prefill.shape, &p, stream);
  if (layout.merge) {
    kernels::MergeParams mp{};
    mp.partial_o = p.partial_o;
    mp.partial_lse = p.partial_lse;
    mp.o = o.data;
    mp.lse = p.lse;
    mp.o_stride_row = o.strides[1];
    mp.num_rows = p.num_rows;
    mp.num_splits = layout.num_chunks;
    detail::launch(*merge, layout.merge->shape, &mp, stream);
  }
}

std::string BatchPrefillCore::describe() const {
  if (!planned) return "not planned";
  const auto& k = layout.prefill;
  return fmt::format("{} work={} grid={} chunks={} chunk={} workspace={} B{}", k.spec.name(), layout.num_work,
                     k.shape.grid[0], layout.num_chunks, layout.chunk_size, layout.workspace.total_bytes(),
                     layout.merge ? "; " + layout.merge->spec.name() : "");
}

}  // namespace attnjit::ops

// The C API of the batch prefill wrappers: a handle owning either wrapper,
// host index arrays in, DLTensors at run(). Conventions as in c_api.cpp.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/c_api_convert.hpp"
#include "api/c_api_guard.hpp"
#include "api/c_api_handles.hpp"
#include "attnjit/attnjit.h"
#include "attnjit/batch_prefill.hpp"
#include "attnjit/error.hpp"


struct attnjit_batch_prefill {
  std::unique_ptr<attnjit::BatchPrefillWithRaggedKVCacheWrapper> ragged;
  std::unique_ptr<attnjit::BatchPrefillWithPagedKVCacheWrapper> paged;
};

namespace {

using attnjit::Error;
using attnjit::Status;
using attnjit::capi::guard;
using attnjit::capi::require_non_null;

constexpr const char* kHandle = "an attnjit_batch_prefill_t* from attnjit_batch_prefill_create";

[[noreturn]] void invalid(const std::string& msg) { throw Error(Status::InvalidArgument, msg); }

std::vector<int32_t> host_array(const int32_t* p, size_t n, const char* fn, const char* name) {
  if (n > 0) require_non_null(p, fn, name, "a host array of int32");
  return p ? std::vector<int32_t>(p, p + n) : std::vector<int32_t>{};
}

// A CUDA-graph buffer: 1-D, contiguous, on the wrapper's device, of int32
// (or, for the mask, uint8); returns its entries.
template <class T>
int64_t graph_buffer(const DLTensor* t, const char* arg, int device, T** data) {
  constexpr bool bytes = sizeof(T) == 1;
  if (t == nullptr) invalid(fmt::format("{}: is NULL; use_cuda_graph=1 needs it", arg));
  const bool dtype_ok = bytes ? t->dtype.bits == 8 && t->dtype.lanes == 1 && t->dtype.code == kDLUInt
                              : t->dtype.bits == 32 && t->dtype.lanes == 1 && t->dtype.code == kDLInt;
  if (!dtype_ok)
    invalid(fmt::format("{}: dtype (code {}, bits {}, lanes {}) is not allowed; allowed: {}", arg, int(t->dtype.code),
                        int(t->dtype.bits), int(t->dtype.lanes), bytes ? "uint8" : "int32"));
  if (t->device.device_type != kDLCUDA || t->device.device_id != device)
    invalid(fmt::format("{}: device (type {}, id {}) is not allowed; allowed: kDLCUDA device {} (the wrapper's)", arg,
                        int(t->device.device_type), t->device.device_id, device));
  if (t->ndim != 1 || t->shape == nullptr)
    invalid(fmt::format("{}: ndim={} is not allowed; allowed: 1", arg, t->ndim));
  if (t->strides && t->shape[0] > 1 && t->strides[0] != 1)
    invalid(fmt::format("{}: stride {} is not allowed; allowed: contiguous (1)", arg, t->strides[0]));
  if (t->data == nullptr) invalid(fmt::format("{}: data is NULL", arg));
  char* at = static_cast<char*>(t->data) + t->byte_offset;
  if (reinterpret_cast<uintptr_t>(at) % sizeof(T) != 0)
    invalid(fmt::format("{}: address {} is not allowed; allowed: a multiple of {} bytes", arg,
                        static_cast<const void*>(at), sizeof(T)));
  *data = reinterpret_cast<T*>(at);  // the wrapper writes the index arrays there
  return t->shape[0];
}

attnjit::BatchPrefillCudaGraphBuffers graph_buffers(int paged, int device, const DLTensor* qo_indptr_buf,
                                                    const DLTensor* kv_indptr_buf, const DLTensor* indices_buf,
                                                    const DLTensor* last_page_len_buf, const DLTensor* mask_buf,
                                                    const DLTensor* qk_indptr_buf) {
  attnjit::BatchPrefillCudaGraphBuffers g;
  const char* kv_name = paged ? "paged_kv_indptr_buf" : "kv_indptr_buf";
  const int64_t qo = graph_buffer(qo_indptr_buf, "qo_indptr_buf", device, &g.qo_indptr);
  const int64_t kv = graph_buffer(kv_indptr_buf, kv_name, device, &g.kv_indptr);
  if (qo < 2 || kv != qo)
    invalid(fmt::format("qo_indptr_buf: {} entries and {}: {} are not allowed; allowed: both max_batch_size + 1 >= 2",
                        qo, kv_name, kv));
  g.max_batch_size = static_cast<int>(qo - 1);
  if (paged) {
    g.max_num_pages = graph_buffer(indices_buf, "paged_kv_indices_buf", device, &g.paged_kv_indices);
    const int64_t lasts = graph_buffer(last_page_len_buf, "paged_kv_last_page_len_buf", device, &g.paged_kv_last_page_len);
    if (lasts != g.max_batch_size)
      invalid(fmt::format("paged_kv_last_page_len_buf: {} entries is not allowed; allowed: max_batch_size = {}", lasts,
                          g.max_batch_size));
  } else {
    for (auto [t, name] : {std::pair{indices_buf, "paged_kv_indices_buf"},
                           std::pair{last_page_len_buf, "paged_kv_last_page_len_buf"}})
      if (t) invalid(fmt::format("{}: is given to a ragged wrapper (paged=0); allowed: NULL", name));
  }
  if (mask_buf || qk_indptr_buf) {
    if (!mask_buf || !qk_indptr_buf)
      invalid(fmt::format("{}: is NULL while {} is given; allowed: both or neither", mask_buf ? "qk_indptr_buf" : "custom_mask_buf",
                          mask_buf ? "custom_mask_buf" : "qk_indptr_buf"));
    g.custom_mask_bytes = graph_buffer(mask_buf, "custom_mask_buf", device, &g.custom_mask);
    const int64_t qk = graph_buffer(qk_indptr_buf, "qk_indptr_buf", device, &g.qk_indptr);
    if (qk < g.max_batch_size)
      invalid(fmt::format("qk_indptr_buf: {} entries is not allowed; allowed: >= max_batch_size + 1 = {}", qk,
                          g.max_batch_size + 1));
  }
  return g;
}

}  // namespace

extern "C" {

attnjit_status_t attnjit_batch_prefill_create(attnjit_runtime_t* rt, int paged, void* workspace, size_t workspace_bytes,
                                              int32_t kv_layout, const char* backend, int device,
                                              attnjit_batch_prefill_t** out) {
  return attnjit_batch_prefill_create_v2(rt, paged, workspace, workspace_bytes, kv_layout, backend, device, 0, nullptr,
                                         nullptr, nullptr, nullptr, nullptr, nullptr, out);
}

attnjit_status_t attnjit_batch_prefill_create_v2(attnjit_runtime_t* rt, int paged, void* workspace,
                                                 size_t workspace_bytes, int32_t kv_layout, const char* backend,
                                                 int device, int use_cuda_graph, const DLTensor* qo_indptr_buf,
                                                 const DLTensor* kv_indptr_buf, const DLTensor* paged_kv_indices_buf,
                                                 const DLTensor* paged_kv_last_page_len_buf,
                                                 const DLTensor* custom_mask_buf, const DLTensor* qk_indptr_buf,
                                                 attnjit_batch_prefill_t** out) {
  if (out) *out = nullptr;
  return guard([&] {
    constexpr const char* fn = "attnjit_batch_prefill_create";
    require_non_null(rt, fn, "rt", "an attnjit_runtime_t* from attnjit_runtime_create");
    require_non_null(out, fn, "out", "a place for the handle");
    if (paged != 0 && paged != 1)
      throw Error(Status::InvalidArgument, fmt::format("{}: paged={} is not a flag; allowed: 0, 1", fn, paged));
    if (kv_layout != ATTNJIT_KV_LAYOUT_NHD && kv_layout != ATTNJIT_KV_LAYOUT_HND)
      throw Error(Status::InvalidArgument,
                  fmt::format("{}: kv_layout={} is not a layout; allowed: 0 (NHD), 1 (HND)", fn, kv_layout));
    if (use_cuda_graph != 0 && use_cuda_graph != 1)
      invalid(fmt::format("{}: use_cuda_graph={} is not a flag; allowed: 0, 1", fn, use_cuda_graph));
    const auto layout = kv_layout == ATTNJIT_KV_LAYOUT_NHD ? attnjit::KVLayout::NHD : attnjit::KVLayout::HND;
    auto h = std::make_unique<attnjit_batch_prefill>();
    const std::string b = backend ? backend : "auto";
    if (use_cuda_graph) {
      const auto g = graph_buffers(paged, device, qo_indptr_buf, kv_indptr_buf, paged_kv_indices_buf,
                                   paged_kv_last_page_len_buf, custom_mask_buf, qk_indptr_buf);
      if (paged)
        h->paged = std::make_unique<attnjit::BatchPrefillWithPagedKVCacheWrapper>(rt->runtime, workspace,
                                                                                  workspace_bytes, g, layout, b, device);
      else
        h->ragged = std::make_unique<attnjit::BatchPrefillWithRaggedKVCacheWrapper>(rt->runtime, workspace,
                                                                                    workspace_bytes, g, layout, b, device);
    } else {
      for (auto [t, name] : {std::pair{qo_indptr_buf, "qo_indptr_buf"}, std::pair{kv_indptr_buf, "kv_indptr_buf"},
                             std::pair{paged_kv_indices_buf, "paged_kv_indices_buf"},
                             std::pair{paged_kv_last_page_len_buf, "paged_kv_last_page_len_buf"},
                             std::pair{custom_mask_buf, "custom_mask_buf"}, std::pair{qk_indptr_buf, "qk_indptr_buf"}})
        if (t)
          invalid(fmt::format("{}: is given but use_cuda_graph=0; allowed: NULL (the fixed buffers serve CUDA-graph "
                              "mode only)",
                              name));
      if (paged)
        h->paged = std::make_unique<attnjit::BatchPrefillWithPagedKVCacheWrapper>(rt->runtime, workspace,
                                                                                  workspace_bytes, layout, b, device);
      else
        h->ragged = std::make_unique<attnjit::BatchPrefillWithRaggedKVCacheWrapper>(rt->runtime, workspace,
                                                                                    workspace_bytes, layout, b, device);
    }
    *out = h.release();
  });
}

attnjit_status_t attnjit_batch_prefill_plan(attnjit_batch_prefill_t* w, const int32_t* qo_indptr,
                                            const int32_t* kv_indptr, size_t batch_size, const int32_t* page_indices,
                                            size_t num_page_indices, const int32_t* last_page_len, int page_size,
                                            int num_qo_heads, int num_kv_heads, int head_dim,
                                            const attnjit_prefill_options_t* options, const char* q_dtype,
                                            const char* kv_dtype, const uint8_t* custom_mask, size_t custom_mask_len,
                                            void* stream) {
  return guard([&] {
    constexpr const char* fn = "attnjit_batch_prefill_plan";
    require_non_null(w, fn, "w", kHandle);
    const attnjit::PrefillOptions po = attnjit::capi::to_prefill_options(options, false);
    attnjit::BatchPrefillPlanOptions o;
    o.causal = po.causal;
    o.pos_encoding_mode = po.pos_encoding_mode;
    o.allow_fp16_qk_reduction = po.allow_fp16_qk_reduction;
    o.window_left = po.window_left;
    o.logits_soft_cap = po.logits_soft_cap;
    o.sm_scale = po.sm_scale;
    o.rope_scale = po.rope_scale;
    o.rope_theta = po.rope_theta;
    o.q_data_type = attnjit::parse_dtype(q_dtype ? q_dtype : "float16", "q_dtype");
    if (kv_dtype) o.kv_data_type = attnjit::parse_dtype(kv_dtype, "kv_dtype");
    if (custom_mask_len > 0) {
      require_non_null(custom_mask, fn, "custom_mask", "host bytes of the flattened mask");
      o.custom_mask.assign(custom_mask, custom_mask + custom_mask_len);
    }
    const auto qo = host_array(qo_indptr, batch_size + 1, fn, "qo_indptr");
    const auto kv = host_array(kv_indptr, batch_size + 1, fn, "kv_indptr");
    const auto s = static_cast<attnjit::Stream>(stream);
    if (w->paged) {
      w->paged->plan(qo, kv, host_array(page_indices, num_page_indices, fn, "page_indices"),
                     host_array(last_page_len, batch_size, fn, "last_page_len"), num_qo_heads, num_kv_heads, head_dim,
                     page_size, o, s);
    } else {
      w->ragged->plan(qo, kv, num_qo_heads, num_kv_heads, head_dim, o, s);
    }
  });
}

attnjit_status_t attnjit_batch_prefill_run(const attnjit_batch_prefill_t* w, const DLTensor* q, const DLTensor* k,
                                           const DLTensor* v, DLTensor* o, DLTensor* lse, void* stream) {
  return attnjit_batch_prefill_run_v2(w, q, k, v, o, lse, 0.f, 0.f, stream);
}

attnjit_status_t attnjit_batch_prefill_run_v2(const attnjit_batch_prefill_t* w, const DLTensor* q, const DLTensor* k,
                                              const DLTensor* v, DLTensor* o, DLTensor* lse, float k_scale,
                                              float v_scale, void* stream) {
  return guard([&] {
    require_non_null(w, "attnjit_batch_prefill_run", "w", kHandle);
    // 0: not provided; anything else goes to the C++ check (> 0, finite).
    const auto ks = k_scale == 0.f ? std::nullopt : std::optional<float>(k_scale);
    const auto vs = v_scale == 0.f ? std::nullopt : std::optional<float>(v_scale);
    const attnjit::TensorView qv = attnjit::from_dlpack(q, "q"), kv = attnjit::from_dlpack(k, "k"),
                              vv = attnjit::from_dlpack(v, "v"), ov = attnjit::from_dlpack(o, "o");
    std::optional<attnjit::TensorView> lv;
    if (lse) lv = attnjit::from_dlpack(lse, "lse");
    const auto s = static_cast<attnjit::Stream>(stream);
    if (w->paged) w->paged->run(qv, kv, vv, ov, lv ? &*lv : nullptr, ks, vs, s);
    else w->ragged->run(qv, kv, vv, ov, lv ? &*lv : nullptr, ks, vs, s);
  });
}

attnjit_status_t attnjit_batch_prefill_workspace_bytes(const attnjit_batch_prefill_t* w, size_t* out) {
  return guard([&] {
    require_non_null(w, "attnjit_batch_prefill_workspace_bytes", "w", kHandle);
    require_non_null(out, "attnjit_batch_prefill_workspace_bytes", "out", "a place for the byte count");
    *out = w->paged ? w->paged->workspace_bytes() : w->ragged->workspace_bytes();
  });
}

attnjit_status_t attnjit_batch_prefill_destroy(attnjit_batch_prefill_t* w) {
  return guard([&] { delete w; });
}

}  // extern "C"

// The C API of the batch prefill wrappers: a handle owning either wrapper,
// host index arrays in, DLTensors at run(). Conventions as in c_api.cpp.
#include <fmt/format.h>

#include <memory>
#include <optional>
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

std::vector<int32_t> host_array(const int32_t* p, size_t n, const char* fn, const char* name) {
  if (n > 0) require_non_null(p, fn, name, "a host array of int32");
  return p ? std::vector<int32_t>(p, p + n) : std::vector<int32_t>{};
}

}  // namespace

extern "C" {

attnjit_status_t attnjit_batch_prefill_create(attnjit_runtime_t* rt, int paged, void* workspace, size_t workspace_bytes,
                                              int32_t kv_layout, const char* backend, int device,
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
    const auto layout = kv_layout == ATTNJIT_KV_LAYOUT_NHD ? attnjit::KVLayout::NHD : attnjit::KVLayout::HND;
    auto h = std::make_unique<attnjit_batch_prefill>();
    const std::string b = backend ? backend : "auto";
    if (paged)
      h->paged = std::make_unique<attnjit::BatchPrefillWithPagedKVCacheWrapper>(rt->runtime, workspace, workspace_bytes,
                                                                                layout, b, device);
    else
      h->ragged = std::make_unique<attnjit::BatchPrefillWithRaggedKVCacheWrapper>(rt->runtime, workspace,
                                                                                  workspace_bytes, layout, b, device);
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
  return guard([&] {
    require_non_null(w, "attnjit_batch_prefill_run", "w", kHandle);
    const attnjit::TensorView qv = attnjit::from_dlpack(q, "q"), kv = attnjit::from_dlpack(k, "k"),
                              vv = attnjit::from_dlpack(v, "v"), ov = attnjit::from_dlpack(o, "o");
    std::optional<attnjit::TensorView> lv;
    if (lse) lv = attnjit::from_dlpack(lse, "lse");
    const auto s = static_cast<attnjit::Stream>(stream);
    if (w->paged) w->paged->run(qv, kv, vv, ov, lv ? &*lv : nullptr, s);
    else w->ragged->run(qv, kv, vv, ov, lv ? &*lv : nullptr, s);
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

// The C API of the batch prefill wrappers (attnjit_batch_prefill.h): an
// attnjit_plan_t owning either wrapper, host index arrays in, DLTensors at
// run(); and the deprecated attnjit_batch_prefill_t functions of attnjit.h,
// shims over it. Conventions as in c_api.cpp.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/c_api_batch_inputs.hpp"
#include "api/c_api_convert.hpp"
#include "api/c_api_fields.hpp"
#include "api/c_api_guard.hpp"
#include "api/c_api_handles.hpp"
#include "api/c_api_wrapper_args.hpp"
#include "api/dlpack_codes.hpp"
#include "attnjit/attnjit.h"
#include "attnjit/attnjit_batch_prefill.h"
#include "attnjit/batch_prefill.hpp"
#include "attnjit/error.hpp"
#include "invalid_argument.hpp"
#include "ops/attention_options/attention_options.hpp"

// The deprecated handle: the plan it shims over.
struct attnjit_batch_prefill {
  attnjit_plan_t* plan;
};

namespace {

using attnjit::Error;
using attnjit::Status;
using attnjit::capi::guard;
using attnjit::capi::require_non_null;

constexpr const char* kOp = "batch_prefill";
constexpr const char* kHandle = "an attnjit_batch_prefill_t* from attnjit_batch_prefill_create";

// Either wrapper behind one plan handle.
struct Wrapper {
  std::unique_ptr<attnjit::BatchPrefillWithRaggedKVCacheWrapper> ragged;
  std::unique_ptr<attnjit::BatchPrefillWithPagedKVCacheWrapper> paged;
  size_t workspace_bytes() const { return paged ? paged->workspace_bytes() : ragged->workspace_bytes(); }
  size_t plan_memory_bytes() const { return paged ? paged->plan_memory_bytes() : ragged->plan_memory_bytes(); }
  std::string describe() const { return paged ? paged->describe() : ragged->describe(); }
};

void refresh(attnjit_plan_t& handle, const Wrapper& w) {
  handle.workspace_bytes = w.workspace_bytes();
  handle.description = w.describe();
}

using attnjit::invalid;

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
                                                    const DLTensor* mask_indptr_buf) {
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
  if (mask_buf || mask_indptr_buf) {
    if (!mask_buf || !mask_indptr_buf)
      invalid(fmt::format("{}: is NULL while {} is given; allowed: both or neither",
                          mask_buf ? "mask_indptr_buf" : "custom_mask_buf",
                          mask_buf ? "custom_mask_buf" : "mask_indptr_buf"));
    g.custom_mask_bytes = graph_buffer(mask_buf, "custom_mask_buf", device, &g.custom_mask);
    const int64_t qk = graph_buffer(mask_indptr_buf, "mask_indptr_buf", device, &g.qk_indptr);
    if (qk < g.max_batch_size)
      invalid(fmt::format("mask_indptr_buf: {} entries is not allowed; allowed: >= max_batch_size + 1 = {}", qk,
                          g.max_batch_size + 1));
  }
  return g;
}

// FlashInfer's flattened boolean mask from a host uint8 / bool array.
constexpr uint8_t kDLBoolCode = 6;  // DLPack 0.8's kDLBool (the distribution's header may predate it)
std::vector<bool> host_mask(const DLTensor* t) {
  if (!t) return {};
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost)
    invalid(fmt::format("custom_mask: device type {} is not allowed; allowed: host memory (kDLCPU, kDLCUDAHost)",
                        int(t->device.device_type)));
  const bool byte = t->dtype.bits == 8 && t->dtype.lanes == 1 && (t->dtype.code == kDLUInt || t->dtype.code == kDLBoolCode);
  if (!byte)
    invalid(fmt::format("custom_mask: dtype {} is not allowed; allowed: uint8 or bool (0 / 1)",
                        attnjit::dlpack::describe(t->dtype)));
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  if (n > 0 && t->strides) {
    int64_t want = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      if (t->shape[i] > 1 && t->strides[i] != want) invalid("custom_mask: must be contiguous");
      want *= t->shape[i];
    }
  }
  if (n > 0 && !t->data) invalid("custom_mask: data is NULL");
  const uint8_t* p = reinterpret_cast<const uint8_t*>(static_cast<const char*>(t->data) + t->byte_offset);
  std::vector<bool> out(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] > 1) invalid(fmt::format("custom_mask[{}]={} is not allowed; allowed: 0 or 1", i, int(p[i])));
    out[size_t(i)] = p[i] != 0;
  }
  return out;
}

// The plan's options from the C struct (kv_layout and backend are the wrapper's).
attnjit::BatchPrefillPlanOptions plan_options(const attnjit_prefill_options_t* options) {
  const attnjit::PrefillOptions po = attnjit::capi::to_prefill_options(options, false);
  if (attnjit::capi::prefill_scales(options).any())
    invalid("options->scale_q / scale_k / scale_v: per-head scale tensors are not supported by the batch prefill "
            "wrappers; allowed: NULL (the run's q_scale / k_scale / v_scale floats scale fp8 q, k and v)");
  attnjit::BatchPrefillPlanOptions o;
  o.o_data_type = po.o_dtype;
  o.causal = po.causal;
  o.allow_fp16_qk_reduction = po.allow_fp16_qk_reduction;
  attnjit::ops::copy_plan_args(po, o);
  return o;
}

attnjit::DType data_type(DLDataType t, const char* field) {
  const auto d = attnjit::dlpack::to_dtype(t);
  if (!d)
    invalid(fmt::format("{}={} is not supported; allowed: float16, bfloat16, float8_e4m3fn (code 10), float8_e5m2 "
                        "(code 12)",
                        field, attnjit::dlpack::describe(t)));
  return *d;
}

}  // namespace

extern "C" {

void attnjit_batch_prefill_wrapper_options_init(attnjit_batch_prefill_wrapper_options_t* options) {
  if (!options) return;
  *options = attnjit_batch_prefill_wrapper_options_t{};
  options->struct_size = sizeof(*options);
  options->kv_layout = ATTNJIT_KV_LAYOUT_NHD;
  options->backend = ATTNJIT_PREFILL_BACKEND_AUTO;
}

attnjit_status_t attnjit_batch_prefill_wrapper_create(attnjit_runtime_t* rt, void* float_workspace_buffer,
                                                      size_t float_workspace_bytes,
                                                      const attnjit_batch_prefill_wrapper_options_t* options,
                                                      const DLTensor* qo_indptr_buf, const DLTensor* kv_indptr_buf,
                                                      const DLTensor* paged_kv_indices_buf,
                                                      const DLTensor* paged_kv_last_page_len_buf,
                                                      const DLTensor* custom_mask_buf, const DLTensor* mask_indptr_buf,
                                                      attnjit_plan_t** out) {
  if (out) *out = nullptr;
  return guard([&] {
    constexpr const char* fn = "attnjit_batch_prefill_wrapper_create";
    attnjit::capi::require_create_args(fn, rt, out);
    attnjit_batch_prefill_wrapper_options_t o;
    attnjit_batch_prefill_wrapper_options_init(&o);
    if (options) {
      attnjit::capi::check_struct_size(options->struct_size, sizeof(o), sizeof(o),
                                       "attnjit_batch_prefill_wrapper_options_init");
      o = *options;
    }
    attnjit::capi::require_flag(o.paged, fn, "options->paged");
    attnjit::capi::require_flag(o.use_cuda_graph, fn, "options->use_cuda_graph");
    if (o.kv_layout != ATTNJIT_KV_LAYOUT_NHD && o.kv_layout != ATTNJIT_KV_LAYOUT_HND)
      invalid(fmt::format("{}: options->kv_layout={} is not a layout; allowed: 0 (NHD), 1 (HND)", fn, o.kv_layout));
    const char* backend = o.backend == ATTNJIT_PREFILL_BACKEND_AUTO  ? "auto"
                          : o.backend == ATTNJIT_PREFILL_BACKEND_FA2 ? "fa2"
                          : o.backend == ATTNJIT_PREFILL_BACKEND_FA3 ? "fa3"
                          : o.backend == ATTNJIT_PREFILL_BACKEND_FA3_WS ? "fa3_ws"
                                                                     : nullptr;
    if (!backend)
      invalid(fmt::format("{}: options->backend={} is not a backend; allowed: 0 (auto), 1 (fa2), 2 (fa3), 3 (fa3_ws)", fn,
                          o.backend));
    const auto layout = o.kv_layout == ATTNJIT_KV_LAYOUT_NHD ? attnjit::KVLayout::NHD : attnjit::KVLayout::HND;
    auto w = std::make_shared<Wrapper>();
    if (o.use_cuda_graph) {
      const auto g = graph_buffers(o.paged, o.device, qo_indptr_buf, kv_indptr_buf, paged_kv_indices_buf,
                                   paged_kv_last_page_len_buf, custom_mask_buf, mask_indptr_buf);
      if (o.paged)
        w->paged = std::make_unique<attnjit::BatchPrefillWithPagedKVCacheWrapper>(
            rt->runtime, float_workspace_buffer, float_workspace_bytes, g, layout, backend, o.device);
      else
        w->ragged = std::make_unique<attnjit::BatchPrefillWithRaggedKVCacheWrapper>(
            rt->runtime, float_workspace_buffer, float_workspace_bytes, g, layout, backend, o.device);
    } else {
      attnjit::capi::refuse_graph_buffers(
          {{qo_indptr_buf, "qo_indptr_buf"}, {kv_indptr_buf, "kv_indptr_buf"},
           {paged_kv_indices_buf, "paged_kv_indices_buf"}, {paged_kv_last_page_len_buf, "paged_kv_last_page_len_buf"},
           {custom_mask_buf, "custom_mask_buf"}, {mask_indptr_buf, "mask_indptr_buf"}},
          "use_cuda_graph");
      if (o.paged)
        w->paged = std::make_unique<attnjit::BatchPrefillWithPagedKVCacheWrapper>(
            rt->runtime, float_workspace_buffer, float_workspace_bytes, layout, backend, o.device);
      else
        w->ragged = std::make_unique<attnjit::BatchPrefillWithRaggedKVCacheWrapper>(
            rt->runtime, float_workspace_buffer, float_workspace_bytes, layout, backend, o.device);
    }
    auto handle = std::make_unique<attnjit_plan_t>(attnjit_plan_t{kOp, w, 0, {}, {}});
    attnjit_plan_t* h = handle.get();
    handle->memory.use_int_workspace = [w, h](void* buffer, size_t bytes) {
      if (w->paged) w->paged->set_int_workspace(buffer, bytes);
      else w->ragged->set_int_workspace(buffer, bytes);
      refresh(*h, *w);
    };
    handle->memory.int_workspace_bytes = [w] { return w->plan_memory_bytes(); };
    handle->memory.use_float_workspace = [w](void* buffer, size_t bytes) {
      if (w->paged) w->paged->reset_workspace_buffer(buffer, bytes);
      else w->ragged->reset_workspace_buffer(buffer, bytes);
    };
    handle->memory.check_tables = [w] {
      if (w->paged) w->paged->check();
      else w->ragged->check();
    };
    refresh(*handle, *w);
    *out = handle.release();
  });
}

}  // extern "C"

namespace {

// attnjit_batch_prefill_wrapper_plan's arguments in the C++ wrappers' types,
// converted one after another so an error names the first bad one.
struct PlanInputs {
  attnjit::BatchPrefillPlanOptions options;
  std::vector<int32_t> qo, kv, indices, last;
};

PlanInputs plan_inputs(const Wrapper& w, const DLTensor* qo_indptr, const DLTensor* kv_indptr,
                       const DLTensor* paged_kv_indices, const DLTensor* paged_kv_last_page_len,
                       const attnjit_prefill_options_t* options, DLDataType q_data_type, DLDataType kv_data_type,
                       const DLTensor* custom_mask) {
  PlanInputs in;
  in.options = plan_options(options);
  in.options.q_data_type = data_type(q_data_type, "q_data_type");
  if (kv_data_type.bits != 0) in.options.kv_data_type = data_type(kv_data_type, "kv_data_type");
  in.options.custom_mask = host_mask(custom_mask);
  in.qo = attnjit::capi::host_int32_array(qo_indptr, "qo_indptr");
  in.kv = attnjit::capi::host_int32_array(kv_indptr, w.paged ? "paged_kv_indptr" : "kv_indptr");
  if (w.paged) {
    in.indices = attnjit::capi::host_int32_array(paged_kv_indices, "paged_kv_indices");
    in.last = attnjit::capi::host_int32_array(paged_kv_last_page_len, "paged_kv_last_page_len");
  } else {
    for (auto [t, name] : {std::pair{paged_kv_indices, "paged_kv_indices"},
                           std::pair{paged_kv_last_page_len, "paged_kv_last_page_len"}})
      if (t) invalid(fmt::format("{}: is given to a ragged wrapper; allowed: NULL", name));
  }
  return in;
}

}  // namespace

extern "C" {

attnjit_status_t attnjit_batch_prefill_wrapper_plan(attnjit_plan_t* wrapper, const DLTensor* qo_indptr,
                                                    const DLTensor* kv_indptr, const DLTensor* paged_kv_indices,
                                                    const DLTensor* paged_kv_last_page_len, int page_size,
                                                    int num_qo_heads, int num_kv_heads, int head_dim,
                                                    const attnjit_prefill_options_t* options,
                                                    DLDataType q_data_type, DLDataType kv_data_type,
                                                    const DLTensor* custom_mask, void* stream) {
  return guard([&] {
    constexpr const char* fn = "attnjit_batch_prefill_wrapper_plan";
    auto& w = attnjit::capi::plan_as_mutable<Wrapper>(wrapper, kOp, fn);
    const PlanInputs in = plan_inputs(w, qo_indptr, kv_indptr, paged_kv_indices, paged_kv_last_page_len, options,
                                      q_data_type, kv_data_type, custom_mask);
    const auto s = static_cast<attnjit::Stream>(stream);
    if (w.paged)
      w.paged->plan(in.qo, in.kv, in.indices, in.last, num_qo_heads, num_kv_heads, head_dim, page_size, in.options,
                    s);
    else
      w.ragged->plan(in.qo, in.kv, num_qo_heads, num_kv_heads, head_dim, in.options, s);
    refresh(*wrapper, w);
  });
}

attnjit_status_t attnjit_batch_prefill_wrapper_workspace_bytes(
    const attnjit_plan_t* wrapper, const DLTensor* qo_indptr, const DLTensor* kv_indptr,
    const DLTensor* paged_kv_indices, const DLTensor* paged_kv_last_page_len, int page_size, int num_qo_heads,
    int num_kv_heads, int head_dim, const attnjit_prefill_options_t* options, DLDataType q_data_type,
    DLDataType kv_data_type, const DLTensor* custom_mask, size_t* float_workspace_bytes,
    size_t* int_workspace_bytes) {
  return guard([&] {
    constexpr const char* fn = "attnjit_batch_prefill_wrapper_workspace_bytes";
    const auto& w = attnjit::capi::plan_as<Wrapper>(wrapper, kOp, fn);
    attnjit::capi::require_workspace_outputs(fn, float_workspace_bytes, int_workspace_bytes);
    const PlanInputs in = plan_inputs(w, qo_indptr, kv_indptr, paged_kv_indices, paged_kv_last_page_len, options,
                                      q_data_type, kv_data_type, custom_mask);
    const attnjit::WorkspaceSizes sizes =
        w.paged ? w.paged->workspace_size(in.qo, in.kv, in.indices, in.last, num_qo_heads, num_kv_heads, head_dim,
                                          page_size, in.options)
                : w.ragged->workspace_size(in.qo, in.kv, num_qo_heads, num_kv_heads, head_dim, in.options);
    *float_workspace_bytes = sizes.float_bytes;
    *int_workspace_bytes = sizes.int_bytes;
  });
}

attnjit_status_t attnjit_batch_prefill_wrapper_run(const attnjit_plan_t* wrapper, const DLTensor* q,
                                                   const DLTensor* k, const DLTensor* v, DLTensor* o, DLTensor* lse,
                                                   float k_scale, float v_scale, void* stream) {
  return guard([&] {
    const auto& w = attnjit::capi::plan_as<Wrapper>(wrapper, kOp, "attnjit_batch_prefill_wrapper_run");
    // 0: not provided; anything else goes to the C++ check (> 0, finite).
    const auto ks = k_scale == 0.f ? std::nullopt : std::optional<float>(k_scale);
    const auto vs = v_scale == 0.f ? std::nullopt : std::optional<float>(v_scale);
    const attnjit::TensorView qv = attnjit::from_dlpack(q, "q"), kv = attnjit::from_dlpack(k, "k"),
                              vv = attnjit::from_dlpack(v, "v"), ov = attnjit::from_dlpack(o, "o");
    std::optional<attnjit::TensorView> lv;
    if (lse) lv = attnjit::from_dlpack(lse, "lse");
    const auto s = static_cast<attnjit::Stream>(stream);
    if (w.paged) w.paged->run(qv, kv, vv, ov, lv ? &*lv : nullptr, ks, vs, s);
    else w.ragged->run(qv, kv, vv, ov, lv ? &*lv : nullptr, ks, vs, s);
  });
}

// ---- deprecated: attnjit_batch_prefill_t (0.2), shims over the plan ----------

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
  const attnjit_status_t st = guard([&] {
    constexpr const char* fn = "attnjit_batch_prefill_create";
    require_non_null(out, fn, "out", "a place for the handle");
    const std::string b = backend ? backend : "auto";
    if (b != "auto" && b != "fa2" && b != "fa3" && b != "fa3_ws")
      throw Error(Status::InvalidArgument,
                  fmt::format("backend='{}' is not a backend; allowed: 'auto', 'fa2', 'fa3', 'fa3_ws'", b));
  });
  if (st != ATTNJIT_OK) return st;
  attnjit_batch_prefill_wrapper_options_t o;
  attnjit_batch_prefill_wrapper_options_init(&o);
  o.paged = paged;
  o.kv_layout = kv_layout;
  const std::string b = backend ? backend : "auto";
  o.backend = b == "fa2"      ? ATTNJIT_PREFILL_BACKEND_FA2
              : b == "fa3"    ? ATTNJIT_PREFILL_BACKEND_FA3
              : b == "fa3_ws" ? ATTNJIT_PREFILL_BACKEND_FA3_WS
                              : ATTNJIT_PREFILL_BACKEND_AUTO;  // "auto": checked above
  o.use_cuda_graph = use_cuda_graph;
  o.device = device;
  attnjit_plan_t* plan = nullptr;
  const attnjit_status_t made = attnjit_batch_prefill_wrapper_create(
      rt, workspace, workspace_bytes, &o, qo_indptr_buf, kv_indptr_buf, paged_kv_indices_buf,
      paged_kv_last_page_len_buf, custom_mask_buf, qk_indptr_buf, &plan);
  if (made == ATTNJIT_OK) *out = new attnjit_batch_prefill{plan};
  return made;
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
    auto& wrapper = attnjit::capi::plan_as_mutable<Wrapper>(w->plan, kOp, fn);
    attnjit::BatchPrefillPlanOptions o = plan_options(options);
    o.q_data_type = attnjit::parse_dtype(q_dtype ? q_dtype : "float16", "q_dtype");
    if (kv_dtype) o.kv_data_type = attnjit::parse_dtype(kv_dtype, "kv_dtype");
    if (custom_mask_len > 0) {
      require_non_null(custom_mask, fn, "custom_mask", "host bytes of the flattened mask");
      o.custom_mask.assign(custom_mask, custom_mask + custom_mask_len);
    }
    const auto qo = host_array(qo_indptr, batch_size + 1, fn, "qo_indptr");
    const auto kv = host_array(kv_indptr, batch_size + 1, fn, "kv_indptr");
    const auto s = static_cast<attnjit::Stream>(stream);
    if (wrapper.paged) {
      wrapper.paged->plan(qo, kv, host_array(page_indices, num_page_indices, fn, "page_indices"),
                          host_array(last_page_len, batch_size, fn, "last_page_len"), num_qo_heads, num_kv_heads,
                          head_dim, page_size, o, s);
    } else {
      wrapper.ragged->plan(qo, kv, num_qo_heads, num_kv_heads, head_dim, o, s);
    }
    refresh(*w->plan, wrapper);
  });
}

attnjit_status_t attnjit_batch_prefill_run(const attnjit_batch_prefill_t* w, const DLTensor* q, const DLTensor* k,
                                           const DLTensor* v, DLTensor* o, DLTensor* lse, void* stream) {
  return attnjit_batch_prefill_run_v2(w, q, k, v, o, lse, 0.f, 0.f, stream);
}

attnjit_status_t attnjit_batch_prefill_run_v2(const attnjit_batch_prefill_t* w, const DLTensor* q, const DLTensor* k,
                                              const DLTensor* v, DLTensor* o, DLTensor* lse, float k_scale,
                                              float v_scale, void* stream) {
  const attnjit_status_t st = guard([&] { require_non_null(w, "attnjit_batch_prefill_run", "w", kHandle); });
  if (st != ATTNJIT_OK) return st;
  return attnjit_batch_prefill_wrapper_run(w->plan, q, k, v, o, lse, k_scale, v_scale, stream);
}

attnjit_status_t attnjit_batch_prefill_workspace_bytes(const attnjit_batch_prefill_t* w, size_t* out) {
  return guard([&] {
    require_non_null(w, "attnjit_batch_prefill_workspace_bytes", "w", kHandle);
    require_non_null(out, "attnjit_batch_prefill_workspace_bytes", "out", "a place for the byte count");
    *out = w->plan->workspace_bytes;
  });
}

attnjit_status_t attnjit_batch_prefill_destroy(attnjit_batch_prefill_t* w) {
  return guard([&] {
    if (!w) return;
    attnjit_plan_destroy(w->plan);
    delete w;
  });
}

}  // extern "C"

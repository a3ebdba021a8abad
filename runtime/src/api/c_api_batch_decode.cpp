// attnjit_batch_decode.h: the batch decode entry points of the C API. Each
// function checks the C caller's handles and arrays, converts to the C++
// API's types (c_api_batch_inputs, c_api_batch_decode_options) and runs the
// C++ call in guard(), so no exception crosses the boundary. Conventions as
// in c_api.cpp: NULL handles and out pointers are named, *out is NULL on
// failure, a NULL options pointer means the init function's defaults.
#include "attnjit/attnjit_batch_decode.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "api/c_api_batch_decode_options.hpp"
#include "api/c_api_batch_inputs.hpp"
#include "api/c_api_device_vectors.hpp"
#include "api/sized_init.hpp"
#include "api/c_api_guard.hpp"
#include "api/c_api_handles.hpp"
#include "api/c_api_wrapper_args.hpp"
#include "attnjit/batch_decode.hpp"
#include "attnjit/error.hpp"
#include "invalid_argument.hpp"
#include "ops/batch_decode/batch_decode_trtllm_batch.hpp"

namespace {

using attnjit::Status;
using attnjit::capi::as_stream;
using attnjit::capi::guard;
using attnjit::capi::require_non_null;

constexpr const char* kOp = "batch_decode";
using Wrapper = attnjit::BatchDecodeWithPagedKVCacheWrapper;

using attnjit::invalid;

// What the generic attnjit_plan_* functions report for a wrapper.
void refresh(attnjit_plan_t& handle, const Wrapper& w, bool planned) {
  handle.workspace_bytes = planned ? w.current_plan().workspace_bytes() : 0;
  handle.description = planned ? w.current_plan().describe() : "batch_decode wrapper: not planned yet";
}

std::optional<attnjit::TensorView> optional_view(const DLTensor* t, const char* arg) {
  if (!t) return std::nullopt;
  return attnjit::from_dlpack(t, arg);
}

// A graph-mode buffer: an int32 device array of one dimension on `device`, its length returned.
int64_t fixed_buffer(const DLTensor* t, const char* arg, int device, int32_t** data) {
  const auto a = attnjit::capi::device_int32_array(t, arg);
  if (a.shape.size() != 1) invalid(fmt::format("{}: shape {} is not allowed; allowed: 1-D", arg, a.shape));
  if (a.device != device)
    invalid(fmt::format("{}: device cuda:{} differs from options->device={}; they must be equal", arg, a.device,
                        device));
  *data = const_cast<int32_t*>(a.data);  // the wrapper writes the page table there
  return a.shape[0];
}

void same_device(const attnjit::capi::DeviceInt32& t, const char* arg, int device) {
  if (t.device != device)
    invalid(fmt::format("{}: device cuda:{} differs from the query's device cuda:{}; they must be equal", arg, t.device,
                        device));
}

// A block table [batch, max_pages] (or [batch, 2, max_pages] with split K/V
// tables) on the query's device; returns max_pages. batch_from: where the
// batch came from, for the message.
int64_t block_table(const attnjit::capi::DeviceInt32& t, const char* arg, int64_t batch, int device, bool shared,
                    const char* batch_from = "the query") {
  const bool ok = shared ? t.shape.size() == 2 && t.shape[0] == batch
                         : t.shape.size() == 3 && t.shape[0] == batch && t.shape[1] == 2;
  if (!ok)
    invalid(fmt::format("{}: shape {} is not allowed; allowed: {} (batch_size={} from {})", arg, t.shape,
                        shared ? "[batch_size, max_pages]" : "[batch_size, 2, max_pages] (uses_shared_paged_kv_idx=0)",
                        batch, batch_from));
  if (t.shape.back() < 1) invalid(fmt::format("{}: shape {} has no pages; allowed: max_pages >= 1", arg, t.shape));
  same_device(t, arg, device);
  return t.shape.back();
}

// Lengths [batch] (any trailing dimensions of size 1, as cuDNN's [batch, 1, 1, 1]).
void lengths(const attnjit::capi::DeviceInt32& t, const char* arg, int64_t batch, int device,
             const char* batch_from = "the query") {
  bool ok = !t.shape.empty() && t.shape[0] == batch;
  for (size_t i = 1; i < t.shape.size(); ++i) ok = ok && t.shape[i] == 1;
  if (!ok)
    invalid(fmt::format("{}: shape {} is not allowed; allowed: [batch_size] with batch_size={} from {}", arg, t.shape,
                        batch, batch_from));
  same_device(t, arg, device);
}

// q's first dimension; `rows` names it in the message (TensorRT-LLM's query
// has a row per token, cuDNN's q one per request).
int64_t rows_of(const attnjit::TensorView& q, const char* arg, const char* rows) {
  if (q.ndim != 3)
    invalid(fmt::format("{}: ndim={} is not allowed; allowed: 3, [{}, num_qo_heads, head_dim] (got {})", arg, q.ndim,
                        rows, q.describe()));
  return q.shape[0];
}

// enable_pdl's C spelling: -1 the library's default (by the GPU), 0 off, 1 on.
std::optional<bool> pdl_choice(int enable_pdl) {
  switch (enable_pdl) {
    case -1: return std::nullopt;
    case 0: return false;
    case 1: return true;
  }
  invalid(fmt::format("enable_pdl={} is not allowed; allowed: -1 (the library's default: on for sm_90 and newer), "
                      "0 (off), 1 (on)",
                      enable_pdl));
}

// What _v2 and _v3 add to the first TensorRT-LLM entry point; the defaults are what it passes.
struct TrtllmExtras {
  const DLTensor* sinks = nullptr;
  int enable_pdl = -1;
  int q_len_per_req = 1;
  int max_q_len = 0;
  const DLTensor* cum_seq_lens_q = nullptr;
  const DLTensor* bmm1_scale = nullptr;
  const DLTensor* bmm2_scale = nullptr;
  const DLTensor* mask = nullptr;  // _v4
};

// _v4's draft-tree mask: uint16 (or uint32) on the query's device, contiguous,
// [batch, q_len_per_req, words] or with cum_seq_lens_q [num_tokens, words]:
// one row per query token, words 16-bit (32-bit) units, an even number of
// 16-bit ones (FlashInfer's ((q_len + 31) / 32) * 2). Returns the rows' 32-bit words.
int mask_row_words(const DLTensor* m, const attnjit::TensorView& q, const attnjit::TrtllmDecodeArgs& a,
                   int64_t batch) {
  if (m->ndim < 2 || m->ndim > 3 || m->shape == nullptr)
    invalid(fmt::format("mask: ndim={} is not allowed; allowed: 3, [batch_size, q_len_per_req, words], or 2, "
                        "[num_tokens, words] (uint16, FlashInfer's bit-packed rows)",
                        m->ndim));
  const std::vector<int64_t> shape(m->shape, m->shape + m->ndim);
  const bool u16 = m->dtype.code == kDLUInt && m->dtype.bits == 16 && m->dtype.lanes == 1;
  const bool u32 = (m->dtype.code == kDLUInt || m->dtype.code == kDLInt) && m->dtype.bits == 32 && m->dtype.lanes == 1;
  if (!u16 && !u32)
    invalid(fmt::format("mask: dtype (code {}, bits {}) is not allowed; allowed: uint16 (FlashInfer's) or 32-bit "
                        "words",
                        int(m->dtype.code), int(m->dtype.bits)));
  const int64_t rows = m->ndim == 3 ? shape[0] * shape[1] : shape[0];
  if (m->ndim == 3 && (shape[0] != batch || shape[1] != a.q_len_per_req || a.cum_seq_lens_q))
    invalid(fmt::format("mask: shape {} is not allowed; allowed: [batch_size={}, q_len_per_req={}, words]{}", shape,
                        batch, a.q_len_per_req, a.cum_seq_lens_q ? " (with cum_seq_lens_q: [num_tokens, words])" : ""));
  if (rows != q.shape[0])
    invalid(fmt::format("mask: shape {} has {} rows; allowed: one per query token row ({})", shape, rows, q.shape[0]));
  const int64_t units = shape.back();
  if (u16 && units % 2 != 0)
    invalid(fmt::format("mask: shape {} is not allowed; a row is 32-bit words, an even number of uint16", shape));
  if (m->strides) {
    int64_t expect = 1;
    for (int i = m->ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && m->strides[i] != expect)
        invalid(fmt::format("mask: strides are not allowed for shape {}; allowed: contiguous (row-major)", shape));
      expect *= shape[i];
    }
  }
  if (m->device.device_type != kDLCUDA || m->device.device_id != q.device)
    invalid(fmt::format("mask: device (type {}, id {}) is not allowed; allowed: the query's, cuda:{}",
                        int(m->device.device_type), m->device.device_id, q.device));
  if (!m->data) invalid("mask: data is NULL");
  if ((reinterpret_cast<uintptr_t>(m->data) + m->byte_offset) % 4 != 0)
    invalid("mask: its first element is not 4-byte aligned; allowed: 32-bit aligned rows");
  return static_cast<int>(u16 ? units / 2 : units);
}

// The three TensorRT-LLM entry points, one path.
void trtllm_decode(const char* fn, attnjit_runtime_t* rt, const DLTensor* query, const DLTensor* k_cache,
                   const DLTensor* v_cache, void* workspace, size_t workspace_bytes, const DLTensor* block_tables,
                   const DLTensor* seq_lens, int64_t max_seq_len, const attnjit_trtllm_decode_options_t* options,
                   const TrtllmExtras& x, DLTensor* out, DLTensor* lse, void* stream) {
  require_non_null(rt, fn, "rt", attnjit::capi::kRuntimeHandle);
  attnjit::TrtllmDecodeArgs a = attnjit::capi::to_trtllm_args(options);
  a.enable_pdl = pdl_choice(x.enable_pdl);
  const auto qv = attnjit::from_dlpack(query, "query");
  rows_of(qv, "query", "num_tokens");
  const auto [kc, vc] = attnjit::capi::kv_cache_views(k_cache, v_cache, true);  // [pages, 1, ...] too, as FlashInfer
  // seq_lens before the batch: with per-request query lengths its length is the batch.
  const auto lens = attnjit::capi::device_int32_array(seq_lens, "seq_lens", true);
  same_device(lens, "seq_lens", qv.device);
  a.q_len_per_req = x.q_len_per_req;
  a.max_q_len = x.max_q_len;
  if (x.cum_seq_lens_q) {
    const attnjit::capi::DeviceVectorRule rule{{DLDataType{kDLInt, 32, 1}}, "int32 (kDLInt, 32)", "batch_size + 1",
                                               lens.shape[0] + 1, "seq_lens", lens.device};
    a.cum_seq_lens_q =
        static_cast<const int32_t*>(attnjit::capi::device_vector(x.cum_seq_lens_q, "cum_seq_lens_q", rule));
    a.batch_size = static_cast<int>(lens.shape[0]);
  }
  const int64_t batch = attnjit::ops::trtllm_batch_size(a, qv);  // checks the query-length arguments
  const char* batch_from = x.cum_seq_lens_q ? "seq_lens' length, with cum_seq_lens_q" : "the query";
  const auto table = attnjit::capi::device_int32_array(block_tables, "block_tables");
  a.max_pages_per_seq =
      block_table(table, "block_tables", batch, qv.device, a.uses_shared_paged_kv_idx, batch_from);
  a.block_tables = table.data;
  lengths(lens, "seq_lens", batch, qv.device, batch_from);
  a.seq_lens = lens.data;
  if (max_seq_len < 1) invalid(fmt::format("max_seq_len={} is not allowed; allowed: >= 1", max_seq_len));
  a.max_seq_len = max_seq_len;
  const auto ov = attnjit::from_dlpack(out, "out");
  a.out_dtype = ov.dtype;
  const auto lv = optional_view(lse, "lse");
  if (x.sinks) {
    // One entry per query head, read by the decode epilogue or the merge kernel.
    const attnjit::capi::DeviceVectorRule rule{
        {DLDataType{kDLFloat, 32, 1}}, "float32 (kDLFloat, 32)", "num_qo_heads", qv.shape[1], "the query", qv.device};
    a.sinks = static_cast<const float*>(attnjit::capi::device_vector(x.sinks, "sinks", rule));
  }
  // Read by the kernels when they run, in place of the options' floats.
  if (x.bmm1_scale)
    a.bmm1_scale_tensor = attnjit::capi::device_float32_scalar(x.bmm1_scale, "bmm1_scale", "the query", qv.device);
  if (x.bmm2_scale)
    a.bmm2_scale_tensor = attnjit::capi::device_float32_scalar(x.bmm2_scale, "bmm2_scale", "the query", qv.device);
  if (x.mask) {
    a.mask_row_words = mask_row_words(x.mask, qv, a, batch);
    a.mask = reinterpret_cast<const uint32_t*>(static_cast<const char*>(x.mask->data) + x.mask->byte_offset);
  }
  attnjit::trtllm_batch_decode_with_kv_cache(rt->runtime, qv, kc, vc, workspace, workspace_bytes, a, ov,
                                             lv ? &*lv : nullptr, as_stream(stream));
}

// cuDNN's ragged offsets (_v2's batch_offsets_q / batch_offsets_o): NULL, or
// int32 on the query's device, 1-D, [batch_size] or cuDNN's cumulative
// [batch_size + 1] (the kernels read the first batch_size entries). Entry b
// is the element offset of request b's row; the values stay on the device,
// unchecked, as a block table's do.
const int32_t* batch_offsets(const DLTensor* t, const char* arg, int64_t batch, int device) {
  if (t == nullptr) return nullptr;
  const auto a = attnjit::capi::device_int32_array(t, arg);
  if (a.shape.size() != 1 || (a.shape[0] != batch && a.shape[0] != batch + 1))
    invalid(fmt::format("{}: shape {} is not allowed; allowed: [batch_size] or [batch_size + 1] (cuDNN's cumulative "
                        "form) with batch_size={} from the query",
                        arg, a.shape, batch));
  same_device(a, arg, device);  // device_int32_array checked the alignment
  return a.data;
}

// The two cuDNN entry points, one path (the first passes no offsets).
void cudnn_decode(const char* fn, attnjit_runtime_t* rt, const DLTensor* q, const DLTensor* k_cache,
                  const DLTensor* v_cache, float scale, void* workspace, size_t workspace_bytes,
                  int64_t max_sequence_kv, const DLTensor* actual_seq_lens_kv, const DLTensor* block_tables,
                  const DLTensor* batch_offsets_q, const DLTensor* batch_offsets_o, DLTensor* out, void* stream) {
  require_non_null(rt, fn, "rt", attnjit::capi::kRuntimeHandle);
  require_non_null(v_cache, fn, "v_cache", "a DLTensor* (cuDNN takes K and V as two tensors)");
  attnjit::CudnnDecodeArgs a;
  if (!std::isfinite(scale) || !(scale > 0.f))
    invalid(fmt::format("scale={} is not allowed; allowed: a finite value > 0 (typically 1/sqrt(head_dim))", scale));
  a.scale = scale;
  const auto qv = attnjit::from_dlpack(q, "q");
  const int64_t batch = rows_of(qv, "q", "batch_size");
  const auto [kc, vc] = attnjit::capi::kv_cache_views(k_cache, v_cache);
  const auto lens = attnjit::capi::device_int32_array(actual_seq_lens_kv, "actual_seq_lens_kv", true);
  lengths(lens, "actual_seq_lens_kv", batch, qv.device);
  a.actual_seq_lens_kv = lens.data;
  const auto table = attnjit::capi::device_int32_array(block_tables, "block_tables");
  a.max_pages_per_seq = block_table(table, "block_tables", batch, qv.device, true);
  a.block_tables = table.data;
  a.batch_offsets_q = batch_offsets(batch_offsets_q, "batch_offsets_q", batch, qv.device);
  a.batch_offsets_o = batch_offsets(batch_offsets_o, "batch_offsets_o", batch, qv.device);
  if (max_sequence_kv < 1) invalid(fmt::format("max_sequence_kv={} is not allowed; allowed: >= 1", max_sequence_kv));
  a.max_sequence_kv = max_sequence_kv;
  a.is_cuda_graph_compatible = true;
  attnjit::cudnn_batch_decode_with_kv_cache(rt->runtime, qv, kc, vc, workspace, workspace_bytes, a,
                                            attnjit::from_dlpack(out, "out"), as_stream(stream));
}

}  // namespace

extern "C" {

void attnjit_batch_decode_wrapper_options_init(attnjit_batch_decode_wrapper_options_t* options) {
  if (options == nullptr) return;  // void: nothing to report through
  *options = attnjit_batch_decode_wrapper_options_t{};
  options->struct_size = sizeof(*options);
  options->kv_layout = ATTNJIT_KV_LAYOUT_NHD;
}

void attnjit_batch_decode_plan_options_init_sized(attnjit_batch_decode_plan_options_t* options, uint32_t struct_size) {
  attnjit_batch_decode_plan_options_t defaults{};
  defaults.pos_encoding_mode = ATTNJIT_POS_ENCODING_NONE;
  defaults.window_left = -1;
  defaults.q_data_type = DLDataType{kDLFloat, 16, 1};
  defaults.kv_data_type = DLDataType{0, 0, 0};  // bits 0: q_data_type
  // Floats stay 0: "not provided".
  attnjit::capi::init_sized(options, defaults, struct_size);
}

// The symbol callers compiled before user variants call: their layout ends at rope_theta.
void(attnjit_batch_decode_plan_options_init)(attnjit_batch_decode_plan_options_t* options) {
  attnjit_batch_decode_plan_options_init_sized(options,
                                               offsetof(attnjit_batch_decode_plan_options_t, rope_theta) + sizeof(float));
}

void attnjit_trtllm_decode_options_init(attnjit_trtllm_decode_options_t* options) {
  if (options == nullptr) return;
  *options = attnjit_trtllm_decode_options_t{};
  options->struct_size = sizeof(*options);
  options->kv_layout = ATTNJIT_KV_LAYOUT_HND;
  options->window_left = -1;
  options->uses_shared_paged_kv_idx = 1;
  options->bmm1_scale = 1.0f;
  options->bmm2_scale = 1.0f;
}

attnjit_status_t attnjit_batch_decode_wrapper_create(attnjit_runtime_t* rt, void* float_workspace_buffer,
                                                     size_t workspace_bytes,
                                                     const attnjit_batch_decode_wrapper_options_t* options,
                                                     const DLTensor* paged_kv_indptr_buffer,
                                                     const DLTensor* paged_kv_indices_buffer,
                                                     const DLTensor* paged_kv_last_page_len_buffer,
                                                     attnjit_plan_t** out) {
  if (out) *out = nullptr;
  return guard([&] {
    constexpr const char* fn = "attnjit_batch_decode_wrapper_create";
    attnjit::capi::require_create_args(fn, rt, out);
    require_non_null(float_workspace_buffer, fn, "float_workspace_buffer", "device memory for the workspace");
    const auto o = attnjit::capi::to_wrapper_options(options);
    int32_t *indptr = nullptr, *indices = nullptr, *last = nullptr;
    int64_t max_batch = 0, max_pages = 0;
    if (o.use_cuda_graph) {
      max_batch = fixed_buffer(paged_kv_indptr_buffer, "paged_kv_indptr_buffer", o.device, &indptr) - 1;
      max_pages = fixed_buffer(paged_kv_indices_buffer, "paged_kv_indices_buffer", o.device, &indices);
      const int64_t lasts = fixed_buffer(paged_kv_last_page_len_buffer, "paged_kv_last_page_len_buffer", o.device, &last);
      if (max_batch < 1 || lasts != max_batch)
        invalid(fmt::format("paged_kv_last_page_len_buffer: {} entries and paged_kv_indptr_buffer: {} are not allowed; "
                            "allowed: max_batch_size >= 1 and max_batch_size + 1 entries",
                            lasts, max_batch + 1));
    } else {
      attnjit::capi::refuse_graph_buffers({{paged_kv_indptr_buffer, "paged_kv_indptr_buffer"},
                                           {paged_kv_indices_buffer, "paged_kv_indices_buffer"},
                                           {paged_kv_last_page_len_buffer, "paged_kv_last_page_len_buffer"}},
                                          "options->use_cuda_graph");
    }
    auto w = std::make_shared<Wrapper>(rt->runtime, float_workspace_buffer, workspace_bytes, o.kv_layout,
                                       o.use_cuda_graph, o.use_tensor_cores, indptr, indices, last,
                                       static_cast<int>(max_batch), max_pages, o.device);
    auto handle = std::make_unique<attnjit_plan_t>(attnjit_plan_t{kOp, w, 0, {}, {}});
    attnjit_plan_t* h = handle.get();
    handle->memory.use_int_workspace = [w, h](void* buffer, size_t bytes) {
      w->set_int_workspace(buffer, bytes);
      refresh(*h, *w, false);  // plan() again
    };
    handle->memory.int_workspace_bytes = [w] { return w->plan_memory_bytes(); };
    handle->memory.use_float_workspace = [w](void* buffer, size_t bytes) { w->set_float_workspace(buffer, bytes); };
    handle->memory.check_tables = [w] { w->check(); };
    refresh(*handle, *w, false);
    *out = handle.release();
  });
}

attnjit_status_t attnjit_batch_decode_wrapper_plan(attnjit_plan_t* wrapper, const DLTensor* indptr,
                                                   const DLTensor* indices, const DLTensor* last_page_len,
                                                   int num_qo_heads, int num_kv_heads, int head_dim, int page_size,
                                                   const attnjit_batch_decode_plan_options_t* options, void* stream) {
  return guard([&] {
    auto& w = attnjit::capi::plan_as_mutable<Wrapper>(wrapper, kOp, "attnjit_batch_decode_wrapper_plan");
    const auto args = attnjit::capi::to_plan_args(options, num_qo_heads, num_kv_heads, head_dim, page_size);
    // One after another: as call arguments their order would be unspecified
    // (GCC reads last_page_len first), and the error must name the first bad one.
    const auto indptr_v = attnjit::capi::host_int32_array(indptr, "indptr");
    const auto indices_v = attnjit::capi::host_int32_array(indices, "indices");
    const auto last_v = attnjit::capi::host_int32_array(last_page_len, "last_page_len");
    w.plan(indptr_v, indices_v, last_v, args, as_stream(stream));
    refresh(*wrapper, w, true);
  });
}

attnjit_status_t attnjit_batch_decode_wrapper_workspace_bytes(const attnjit_plan_t* wrapper, const DLTensor* indptr,
                                                              const DLTensor* indices, const DLTensor* last_page_len,
                                                              int num_qo_heads, int num_kv_heads, int head_dim,
                                                              int page_size,
                                                              const attnjit_batch_decode_plan_options_t* options,
                                                              size_t* float_workspace_bytes,
                                                              size_t* int_workspace_bytes) {
  return guard([&] {
    constexpr const char* fn = "attnjit_batch_decode_wrapper_workspace_bytes";
    const auto& w = attnjit::capi::plan_as<Wrapper>(wrapper, kOp, fn);
    attnjit::capi::require_workspace_outputs(fn, float_workspace_bytes, int_workspace_bytes);
    const auto args = attnjit::capi::to_plan_args(options, num_qo_heads, num_kv_heads, head_dim, page_size);
    // In attnjit_batch_decode_wrapper_plan's order, so both name the same first bad argument.
    const auto indptr_v = attnjit::capi::host_int32_array(indptr, "indptr");
    const auto indices_v = attnjit::capi::host_int32_array(indices, "indices");
    const auto last_v = attnjit::capi::host_int32_array(last_page_len, "last_page_len");
    const attnjit::WorkspaceSizes sizes = w.workspace_size(indptr_v, indices_v, last_v, args);
    *float_workspace_bytes = sizes.float_bytes;
    *int_workspace_bytes = sizes.int_bytes;
  });
}

namespace {

void wrapper_run(const char* fn, const attnjit_plan_t* wrapper, const DLTensor* q, const DLTensor* k_cache,
                 const DLTensor* v_cache, DLTensor* out, DLTensor* lse, float k_scale, float v_scale,
                 std::optional<bool> enable_pdl, void* stream) {
  const auto& w = attnjit::capi::plan_as<Wrapper>(wrapper, kOp, fn);
  const auto ks = attnjit::capi::optional_positive(k_scale, "k_scale");
  const auto vs = attnjit::capi::optional_positive(v_scale, "v_scale");
  const auto qv = attnjit::from_dlpack(q, "q");
  const auto [kc, vc] = attnjit::capi::kv_cache_views(k_cache, v_cache);
  const auto ov = attnjit::from_dlpack(out, "out");
  const auto lv = optional_view(lse, "lse");
  w.run(qv, kc, vc, ov, lv ? &*lv : nullptr, ks, vs, as_stream(stream), enable_pdl);
}

}  // namespace

attnjit_status_t attnjit_batch_decode_wrapper_run(const attnjit_plan_t* wrapper, const DLTensor* q,
                                                  const DLTensor* k_cache, const DLTensor* v_cache, DLTensor* out,
                                                  DLTensor* lse, float k_scale, float v_scale, void* stream) {
  return guard([&] {
    wrapper_run("attnjit_batch_decode_wrapper_run", wrapper, q, k_cache, v_cache, out, lse, k_scale, v_scale, false,
                stream);
  });
}

attnjit_status_t attnjit_batch_decode_wrapper_run_v2(const attnjit_plan_t* wrapper, const DLTensor* q,
                                                     const DLTensor* k_cache, const DLTensor* v_cache, DLTensor* out,
                                                     DLTensor* lse, float k_scale, float v_scale, int enable_pdl,
                                                     void* stream) {
  return guard([&] {
    const auto pdl = pdl_choice(enable_pdl);
    wrapper_run("attnjit_batch_decode_wrapper_run_v2", wrapper, q, k_cache, v_cache, out, lse, k_scale, v_scale, pdl,
                stream);
  });
}

attnjit_status_t attnjit_trtllm_batch_decode_with_kv_cache(attnjit_runtime_t* rt, const DLTensor* query,
                                                           const DLTensor* k_cache, const DLTensor* v_cache,
                                                           void* workspace, size_t workspace_bytes,
                                                           const DLTensor* block_tables, const DLTensor* seq_lens,
                                                           int64_t max_seq_len,
                                                           const attnjit_trtllm_decode_options_t* options,
                                                           DLTensor* out, DLTensor* lse, void* stream) {
  return guard([&] {
    trtllm_decode("attnjit_trtllm_batch_decode_with_kv_cache", rt, query, k_cache, v_cache, workspace,
                  workspace_bytes, block_tables, seq_lens, max_seq_len, options, TrtllmExtras{}, out, lse, stream);
  });
}

attnjit_status_t attnjit_trtllm_batch_decode_with_kv_cache_v2(
    attnjit_runtime_t* rt, const DLTensor* query, const DLTensor* k_cache, const DLTensor* v_cache, void* workspace,
    size_t workspace_bytes, const DLTensor* block_tables, const DLTensor* seq_lens, int64_t max_seq_len,
    const attnjit_trtllm_decode_options_t* options, const DLTensor* sinks, int enable_pdl, DLTensor* out,
    DLTensor* lse, void* stream) {
  return guard([&] {
    TrtllmExtras x;
    x.sinks = sinks;
    x.enable_pdl = enable_pdl;
    trtllm_decode("attnjit_trtllm_batch_decode_with_kv_cache_v2", rt, query, k_cache, v_cache, workspace,
                  workspace_bytes, block_tables, seq_lens, max_seq_len, options, x, out, lse, stream);
  });
}

attnjit_status_t attnjit_trtllm_batch_decode_with_kv_cache_v3(
    attnjit_runtime_t* rt, const DLTensor* query, const DLTensor* k_cache, const DLTensor* v_cache, void* workspace,
    size_t workspace_bytes, const DLTensor* block_tables, const DLTensor* seq_lens, int64_t max_seq_len,
    const attnjit_trtllm_decode_options_t* options, const DLTensor* sinks, int enable_pdl, int q_len_per_req,
    int max_q_len, const DLTensor* cum_seq_lens_q, const DLTensor* bmm1_scale, const DLTensor* bmm2_scale,
    DLTensor* out, DLTensor* lse, void* stream) {
  return guard([&] {
    const TrtllmExtras x{sinks, enable_pdl, q_len_per_req, max_q_len, cum_seq_lens_q, bmm1_scale, bmm2_scale};
    trtllm_decode("attnjit_trtllm_batch_decode_with_kv_cache_v3", rt, query, k_cache, v_cache, workspace,
                  workspace_bytes, block_tables, seq_lens, max_seq_len, options, x, out, lse, stream);
  });
}

attnjit_status_t attnjit_trtllm_batch_decode_with_kv_cache_v4(
    attnjit_runtime_t* rt, const DLTensor* query, const DLTensor* k_cache, const DLTensor* v_cache, void* workspace,
    size_t workspace_bytes, const DLTensor* block_tables, const DLTensor* seq_lens, int64_t max_seq_len,
    const attnjit_trtllm_decode_options_t* options, const DLTensor* sinks, int enable_pdl, int q_len_per_req,
    int max_q_len, const DLTensor* cum_seq_lens_q, const DLTensor* bmm1_scale, const DLTensor* bmm2_scale,
    const DLTensor* mask, DLTensor* out, DLTensor* lse, void* stream) {
  return guard([&] {
    const TrtllmExtras x{sinks, enable_pdl, q_len_per_req, max_q_len, cum_seq_lens_q, bmm1_scale, bmm2_scale, mask};
    trtllm_decode("attnjit_trtllm_batch_decode_with_kv_cache_v4", rt, query, k_cache, v_cache, workspace,
                  workspace_bytes, block_tables, seq_lens, max_seq_len, options, x, out, lse, stream);
  });
}

attnjit_status_t attnjit_cudnn_batch_decode_with_kv_cache(attnjit_runtime_t* rt, const DLTensor* q,
                                                          const DLTensor* k_cache, const DLTensor* v_cache,
                                                          float scale, void* workspace, size_t workspace_bytes,
                                                          int64_t max_sequence_kv,
                                                          const DLTensor* actual_seq_lens_kv,
                                                          const DLTensor* block_tables, DLTensor* out, void* stream) {
  return guard([&] {
    cudnn_decode("attnjit_cudnn_batch_decode_with_kv_cache", rt, q, k_cache, v_cache, scale, workspace,
                 workspace_bytes, max_sequence_kv, actual_seq_lens_kv, block_tables, nullptr, nullptr, out, stream);
  });
}

attnjit_status_t attnjit_cudnn_batch_decode_with_kv_cache_v2(
    attnjit_runtime_t* rt, const DLTensor* q, const DLTensor* k_cache, const DLTensor* v_cache, float scale,
    void* workspace, size_t workspace_bytes, int64_t max_sequence_kv, const DLTensor* actual_seq_lens_kv,
    const DLTensor* block_tables, const DLTensor* batch_offsets_q, const DLTensor* batch_offsets_o, DLTensor* out,
    void* stream) {
  return guard([&] {
    cudnn_decode("attnjit_cudnn_batch_decode_with_kv_cache_v2", rt, q, k_cache, v_cache, scale, workspace,
                 workspace_bytes, max_sequence_kv, actual_seq_lens_kv, block_tables, batch_offsets_q,
                 batch_offsets_o, out, stream);
  });
}

}  // extern "C"

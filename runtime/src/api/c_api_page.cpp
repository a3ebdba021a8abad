// attnjit_page.h: append_paged_kv_cache and get_batch_indices_positions over
// DLTensors. The tensors become TensorViews (from_dlpack and kv_cache_views
// name the argument in every refusal); the int32 index arrays are checked
// here (dtype, device, 1-D contiguous, length against the argument it
// follows) and handed on as device pointers; the C++ calls check the rest
// (ops/page/page_problem.cpp), all inside guard().
#include "attnjit/attnjit_page.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

#include "api/c_api_batch_inputs.hpp"
#include "api/c_api_guard.hpp"
#include "api/c_api_handles.hpp"
#include "attnjit/error.hpp"
#include "attnjit/page.hpp"
#include "attnjit/tensor.hpp"
#include "invalid_argument.hpp"

namespace {

using attnjit::capi::as_stream;
using attnjit::capi::guard;
using attnjit::capi::kRuntimeHandle;
using attnjit::capi::require_non_null;

using attnjit::invalid;

// Where an array's length and device come from, for the messages:
// "[nnz] with nnz=4 from append_key", "differs from append_key's device".
struct Owner {
  const char* length_name;  // "nnz", "batch_size + 1"
  int64_t length;           // -1: any
  const char* from;         // "append_key"
  int device;
  const char* device_from;  // "append_key"
};

// A 1-D int32 array on the owner's device, of the owner's length.
attnjit::capi::DeviceInt32 index_array(const DLTensor* t, const char* arg, const Owner& owner) {
  auto a = attnjit::capi::device_int32_array(t, arg);
  if (a.shape.size() != 1)
    invalid(fmt::format("{}: shape {} is not allowed; allowed: 1-D [{}]", arg, a.shape, owner.length_name));
  if (owner.length >= 0 && a.shape[0] != owner.length)
    invalid(fmt::format("{}: shape {} is not allowed; allowed: [{}] with {}={} from {}", arg, a.shape,
                        owner.length_name, owner.length_name, owner.length, owner.from));
  if (a.device != owner.device)
    invalid(fmt::format("{}: device cuda:{} differs from {}'s device cuda:{}; they must be equal", arg, a.device,
                        owner.device_from, owner.device));
  return a;
}

attnjit::KVLayout layout_of(int32_t kv_layout) {
  switch (kv_layout) {
    case ATTNJIT_KV_LAYOUT_NHD: return attnjit::KVLayout::NHD;
    case ATTNJIT_KV_LAYOUT_HND: return attnjit::KVLayout::HND;
    default: invalid(fmt::format("kv_layout={} is not a layout; allowed: 0 (NHD), 1 (HND)", kv_layout));
  }
}

}  // namespace

extern "C" {

attnjit_status_t attnjit_append_paged_kv_cache(attnjit_runtime_t* rt, const DLTensor* append_key,
                                               const DLTensor* append_value, const DLTensor* batch_indices,
                                               const DLTensor* positions, DLTensor* k_cache, DLTensor* v_cache,
                                               const DLTensor* kv_indices, const DLTensor* kv_indptr,
                                               const DLTensor* kv_last_page_len, int32_t kv_layout, void* stream) {
  return guard([&] {
    require_non_null(rt, "attnjit_append_paged_kv_cache", "rt", kRuntimeHandle);
    const attnjit::KVLayout layout = layout_of(kv_layout);
    const auto ak = attnjit::from_dlpack(append_key, "append_key");
    const auto av = attnjit::from_dlpack(append_value, "append_value");
    const auto [kc, vc] = attnjit::capi::kv_cache_views(k_cache, v_cache);
    if (ak.ndim != 3)
      invalid(fmt::format("append_key: ndim={} is not allowed; allowed: 3, [nnz, num_kv_heads, head_dim]", ak.ndim));
    const int64_t nnz = ak.shape[0];
    const auto last = index_array(kv_last_page_len, "kv_last_page_len", {"batch_size", -1, "append_key", ak.device, "append_key"});
    const int64_t batch = last.shape[0];
    if (batch >= INT32_MAX)
      invalid(fmt::format("kv_last_page_len: shape [{}] is not allowed; allowed: fewer than {} requests", batch,
                          INT32_MAX));
    attnjit::PagedKVAppendTable table;
    table.batch_size = static_cast<int>(batch);
    table.kv_last_page_len = last.data;
    table.kv_indptr =
        index_array(kv_indptr, "kv_indptr", {"batch_size + 1", batch + 1, "kv_last_page_len", ak.device, "append_key"}).data;
    const auto indices = index_array(kv_indices, "kv_indices", {"num_indices", -1, "append_key", ak.device, "append_key"});
    table.kv_indices = indices.data;
    table.num_indices = indices.shape[0];
    table.batch_indices = index_array(batch_indices, "batch_indices", {"nnz", nnz, "append_key", ak.device, "append_key"}).data;
    table.positions = index_array(positions, "positions", {"nnz", nnz, "append_key", ak.device, "append_key"}).data;
    attnjit::append_paged_kv_cache(rt->runtime, ak, av, table, kc, vc, layout, as_stream(stream));
  });
}

attnjit_status_t attnjit_get_batch_indices_positions(attnjit_runtime_t* rt, const DLTensor* append_indptr,
                                                     const DLTensor* seq_lens, int64_t nnz, DLTensor* batch_indices,
                                                     DLTensor* positions, void* stream) {
  return guard([&] {
    require_non_null(rt, "attnjit_get_batch_indices_positions", "rt", kRuntimeHandle);
    if (nnz < 0 || nnz > INT32_MAX)
      invalid(fmt::format("nnz={} is not allowed; allowed: 0 to {} (int32 outputs)", nnz, INT32_MAX));
    const auto indptr = attnjit::capi::device_int32_array(append_indptr, "append_indptr");
    if (indptr.shape.size() != 1 || indptr.shape[0] < 1)
      invalid(fmt::format("append_indptr: shape {} is not allowed; allowed: [batch_size + 1], at least one entry",
                          indptr.shape));
    const int64_t batch = indptr.shape[0] - 1;
    if (batch >= INT32_MAX)
      invalid(fmt::format("append_indptr: shape {} is not allowed; allowed: at most {} entries", indptr.shape,
                          INT32_MAX));
    const int device = indptr.device;
    const auto lens = index_array(
        seq_lens, "seq_lens", {"batch_size", batch, "append_indptr's batch_size + 1 entries", device, "append_indptr"});
    const auto bi = index_array(batch_indices, "batch_indices", {"nnz", nnz, "the nnz argument", device, "append_indptr"});
    const auto pos = index_array(positions, "positions", {"nnz", nnz, "the nnz argument", device, "append_indptr"});
    attnjit::get_batch_indices_positions(rt->runtime, indptr.data, lens.data, static_cast<int>(batch), nnz,
                                         const_cast<int32_t*>(bi.data), const_cast<int32_t*>(pos.data), device,
                                         as_stream(stream));
  });
}

}  // extern "C"

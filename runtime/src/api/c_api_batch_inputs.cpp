#include "api/c_api_batch_inputs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "api/c_api_device_vectors.hpp"
#include "api/dlpack_codes.hpp"
#include "attnjit/error.hpp"
#include "invalid_argument.hpp"

namespace attnjit::capi {

namespace {

std::vector<int64_t> shape_of(const DLTensor& t) {
  return t.shape ? std::vector<int64_t>(t.shape, t.shape + t.ndim) : std::vector<int64_t>{};
}

// NULL, no shape, negative sizes, a dtype other than int32 (or uint32 when
// allowed), or strides that are not compact row-major (the kernels index the
// arrays densely).
void check_int_array(const DLTensor* t, const char* arg, bool allow_uint32) {
  if (t == nullptr) invalid(fmt::format("{}: is NULL; expected a DLTensor* of int32", arg));
  if (t->ndim < 1 || t->ndim > 8 || t->shape == nullptr)
    invalid(fmt::format("{}: ndim={} (shape {}) is not allowed; allowed: an int32 array of 1 to 8 dimensions", arg,
                        t->ndim, t->shape ? "given" : "NULL"));
  const auto shape = shape_of(*t);
  for (int64_t s : shape)
    if (s < 0) invalid(fmt::format("{}: shape {} has a negative size", arg, shape));
  const bool i32 = t->dtype.code == kDLInt && t->dtype.bits == 32 && t->dtype.lanes == 1;
  const bool u32 = t->dtype.code == kDLUInt && t->dtype.bits == 32 && t->dtype.lanes == 1;
  if (!i32 && !(allow_uint32 && u32))
    invalid(fmt::format("{}: dtype {} is not allowed; allowed: int32 (kDLInt, 32){}", arg, dlpack::describe(t->dtype),
                        allow_uint32 ? " or uint32 (kDLUInt, 32)" : ""));
  if (t->strides) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && t->strides[i] != expect)
        invalid(fmt::format("{}: strides {} are not allowed for shape {}; allowed: contiguous (row-major)", arg,
                            std::vector<int64_t>(t->strides, t->strides + t->ndim), shape));
      expect *= shape[i];
    }
  }
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

}  // namespace

std::vector<int32_t> host_int32_array(const DLTensor* t, const char* arg) {
  check_int_array(t, arg, false);
  const int type = static_cast<int>(t->device.device_type);
  if (type != kDLCPU && type != kDLCUDAHost)
    invalid(fmt::format("{}: device_type={} ({}) is not allowed; allowed: kDLCPU or kDLCUDAHost (the page table is "
                        "read on the host: copy it there first)",
                        arg, type, dlpack::device_type_name(type)));
  if (t->ndim != 1) invalid(fmt::format("{}: ndim={} is not allowed; allowed: 1", arg, t->ndim));
  std::vector<int32_t> out(static_cast<size_t>(t->shape[0]));
  if (!out.empty()) {
    if (t->data == nullptr) invalid(fmt::format("{}: data is NULL for {} elements", arg, out.size()));
    std::memcpy(out.data(), static_cast<const char*>(t->data) + t->byte_offset, out.size() * sizeof(int32_t));
  }
  return out;
}

DeviceInt32 device_int32_array(const DLTensor* t, const char* arg, bool allow_uint32) {
  check_int_array(t, arg, allow_uint32);
  const int type = static_cast<int>(t->device.device_type);
  if (type != kDLCUDA)
    invalid(fmt::format("{}: device_type={} ({}) is not allowed; allowed: kDLCUDA (it is read by the kernel)", arg,
                        type, dlpack::device_type_name(type)));
  DeviceInt32 d;
  d.shape = shape_of(*t);
  d.device = t->device.device_id;
  if (numel(d.shape) > 0 && t->data == nullptr) invalid(fmt::format("{}: data is NULL", arg));
  d.data = reinterpret_cast<const int32_t*>(static_cast<const char*>(t->data) + t->byte_offset);
  check_element_alignment(d.data, sizeof(int32_t), arg);
  return d;
}

std::pair<TensorView, TensorView> kv_cache_views(const DLTensor* k_cache, const DLTensor* v_cache,
                                                 bool allow_one_tensor) {
  if (v_cache) return {from_dlpack(k_cache, "k_cache"), from_dlpack(v_cache, "v_cache")};
  if (k_cache == nullptr) invalid("kv_cache: is NULL; expected a DLTensor* (k_cache, or the 5-D cache with v_cache NULL)");
  if (k_cache->ndim != 5 || k_cache->shape == nullptr)
    invalid(fmt::format("kv_cache: ndim={} is not allowed with v_cache NULL; allowed: 5, [pages, 2, page_size, "
                        "num_kv_heads, head_dim] (NHD) or [pages, 2, num_kv_heads, page_size, head_dim] (HND){}, "
                        "or pass k_cache and v_cache",
                        k_cache->ndim, allow_one_tensor ? " (or [pages, 1, ...]: K and V are one tensor)" : ""));
  const auto shape = shape_of(*k_cache);
  if (shape[1] != 2 && !(allow_one_tensor && shape[1] == 1))
    invalid(fmt::format("kv_cache: shape {} is not allowed; shape[1] must be 2 (K then V){}", shape,
                        allow_one_tensor ? " or 1 (K and V are the same tensor, as FlashInfer reads it)" : ""));
  int64_t strides[5];
  if (k_cache->strides) {
    std::memcpy(strides, k_cache->strides, sizeof strides);
  } else {  // DLPack: NULL strides are compact row-major
    strides[4] = 1;
    for (int i = 3; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  }
  if (strides[1] < 0)
    invalid(fmt::format("kv_cache: strides[1]={} is not allowed; allowed: >= 0 (V after K)", strides[1]));
  // Each half as a 4-D DLTensor of its own, so from_dlpack checks device,
  // dtype and shape as for any tensor.
  auto half = [&](int which, const char* arg) {
    int64_t s4[4] = {shape[0], shape[2], shape[3], shape[4]};
    int64_t st4[4] = {strides[0], strides[2], strides[3], strides[4]};
    DLTensor h = *k_cache;
    h.ndim = 4;
    h.shape = s4;
    h.strides = st4;
    const auto bits = k_cache->dtype.bits * k_cache->dtype.lanes;
    h.byte_offset += static_cast<uint64_t>(which * strides[1] * (bits / 8));
    return from_dlpack(&h, arg);  // copies shape and strides out
  };
  if (shape[1] == 1) return {half(0, "kv_cache[:, 0] (K)"), half(0, "kv_cache[:, 0] (V: K's tensor)")};
  return {half(0, "kv_cache[:, 0] (K)"), half(1, "kv_cache[:, 1] (V)")};
}

}  // namespace attnjit::capi

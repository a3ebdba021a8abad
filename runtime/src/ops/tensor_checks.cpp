#include "ops/tensor_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "attnjit/error.hpp"
#include "invalid_argument.hpp"

namespace attnjit::ops {

void check_tensor(const TensorView& t, const char* name, DType dtype, int device,
                  std::initializer_list<int64_t> shape, int align_bytes) {
  check_tensor(t, name, dtype, device, std::vector<int64_t>(shape), align_bytes);
}

void check_tensor(const TensorView& t, const char* name, DType dtype, int device, const std::vector<int64_t>& want,
                  int align_bytes) {
  auto fail = [&](const std::string& what) {
    throw Error(Status::InvalidArgument, fmt::format("{}: {} (got {})", name, what, t.describe()));
  };
  if (!t.data) fail("data pointer is null");
  if (t.dtype != dtype) fail(fmt::format("dtype must be {} for this plan", to_string(dtype)));
  if (t.device != device) fail(fmt::format("must be on cuda:{} like the plan", device));
  if (t.ndim != static_cast<int>(want.size()) ||
      !std::equal(want.begin(), want.end(), t.shape.begin()))
    fail(fmt::format("shape must be [{}] for this plan", fmt::join(want, ", ")));
  if (t.strides[t.ndim - 1] != 1) fail("the last dimension must be contiguous (stride 1)");
  const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
  if (reinterpret_cast<uintptr_t>(t.data) % align_bytes != 0)
    fail(fmt::format("data must be {}-byte aligned", align_bytes));
  for (int i = 0; i + 1 < t.ndim; ++i)
    if ((t.strides[i] * esize) % align_bytes != 0 && t.shape[i] > 1)
      fail(fmt::format("stride of dim {} must be a multiple of {} bytes", i, align_bytes));
}

HeadScales check_head_scales(const PrefillScales* scales, DType q_dtype, int64_t num_qo_heads, int64_t num_kv_heads,
                             int device) {
  HeadScales out;
  if (!scales) return out;
  const std::pair<const TensorView*, const char*> given[] = {
      {scales->scale_q, "scale_q"}, {scales->scale_k, "scale_k"}, {scales->scale_v, "scale_v"}};
  for (auto [t, name] : given) {
    if (!t) continue;
    if (q_dtype != DType::E4M3)
      throw Error(Status::Unsupported,
                  fmt::format("{}: per-head scales are not supported with q.dtype={}; allowed: None (they dequantize "
                              "float8_e4m3fn q, k and v)",
                              name, to_string(q_dtype)));
    const int64_t heads = t == scales->scale_q ? num_qo_heads : num_kv_heads;
    check_tensor(*t, name, DType::F32, device, {heads}, 4);
  }
  out.q = scales->scale_q ? static_cast<const float*>(scales->scale_q->data) : nullptr;
  out.k = scales->scale_k ? static_cast<const float*>(scales->scale_k->data) : nullptr;
  out.v = scales->scale_v ? static_cast<const float*>(scales->scale_v->data) : nullptr;
  return out;
}

std::string shape_of(const TensorView& t) {
  return fmt::format("[{}]", fmt::join(t.shape.begin(), t.shape.begin() + t.ndim, ", "));
}

int narrow_dim(int64_t value, const char* arg, int index, const char* meaning) {
  if (value > INT_MAX)
    invalid(fmt::format("{}: shape[{}]={} ({}) is too large; allowed: <= {}", arg, index, value, meaning, INT_MAX));
  return static_cast<int>(value);
}

void check_contiguous_kv(const TensorView& q, const TensorView& k, const TensorView& v, KVLayout kv_layout) {
  const char* kv_shape = kv_layout == KVLayout::NHD ? "[kv_len, num_kv_heads, head_dim] for kv_layout NHD"
                                                    : "[num_kv_heads, kv_len, head_dim] for kv_layout HND";
  if (k.ndim != 3)
    invalid(fmt::format("k: ndim={} (shape {}) is not allowed; allowed: 3, {}", k.ndim, shape_of(k), kv_shape));
  if (v.ndim != 3)
    invalid(fmt::format("v: ndim={} (shape {}) is not allowed; allowed: 3, {}", v.ndim, shape_of(v), kv_shape));
  if (v.shape != k.shape)
    invalid(fmt::format("v: shape {} differs from k's shape {}; they must be equal", shape_of(v), shape_of(k)));
  if (v.dtype != k.dtype)
    invalid(fmt::format("v: dtype {} differs from k's dtype {}; they must be equal", to_string(v.dtype),
                        to_string(k.dtype)));
  const int q_last = q.ndim - 1;
  if (k.shape[2] != q.shape[q_last])
    invalid(fmt::format("k: head_dim (shape[2])={} differs from q's head_dim (shape[{}])={}; they must be equal",
                        k.shape[2], q_last, q.shape[q_last]));
  auto same_device = [&](const TensorView& t, const char* name) {
    if (t.device != q.device)
      invalid(fmt::format("{}: device cuda:{} differs from q's device cuda:{}; all tensors must be on one device",
                          name, t.device, q.device));
  };
  same_device(k, "k");
  same_device(v, "v");
}

}  // namespace attnjit::ops

// TensorView: the non-owning device-tensor view every operator takes, and its
// construction from DLPack. from_dlpack is the one gate foreign tensors pass,
// so it checks everything an operator would otherwise trip over (device,
// dtype, rank, negative sizes or strides, element-count overflow) and says
// which argument was wrong, with its value and what is allowed.
#include "attnjit/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <limits>

#include "api/dlpack_codes.hpp"
#include "attnjit/error.hpp"
#include "invalid_argument.hpp"

namespace attnjit {

namespace {

constexpr const char* kAllowedDtypes =
    "float16 (kDLFloat,16), bfloat16 (kDLBfloat,16), float32 (kDLFloat,32), "
    "float8_e4m3fn (code 10, bits 8), float8_e5m2 (code 12, bits 8); "
    "fp8 may also arrive as 8-bit integers with a dtype override";

const char* name_or(const char* arg) { return arg ? arg : "tensor"; }

// Element-count product with an overflow check (a foreign shape is untrusted).
bool checked_numel(const int64_t* shape, int ndim, int64_t* out) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i)
    if (__builtin_mul_overflow(n, shape[i], &n)) return false;
  *out = n;
  return true;
}

void check_device(const DLTensor& t, const char* arg) {
  const int type = static_cast<int>(t.device.device_type);
  if (type == kDLCUDAManaged)
    // Managed memory would work for the kernels, but DLPack reports its
    // device_id as 0 whatever GPU will touch it, so we could not know which
    // device to plan and launch for. The caller can pass a kDLCUDA view.
    invalid(fmt::format("{}: device_type={} (kDLCUDAManaged) is not supported: DLPack gives managed "
                        "memory no device ordinal; allowed: kDLCUDA (CUDA device memory)",
                        arg, type));
  if (type != kDLCUDA)
    invalid(fmt::format("{}: device_type={} ({}) is not supported; allowed: kDLCUDA (CUDA device memory)", arg,
                        type, dlpack::device_type_name(type)));
  if (t.device.device_id < 0)
    invalid(fmt::format("{}: device_id={} is negative; allowed: a CUDA device ordinal >= 0", arg,
                        t.device.device_id));
}

DType check_dtype(const DLTensor& t, const char* arg, std::optional<DType> override_dtype) {
  if (t.dtype.lanes != 1)
    invalid(fmt::format("{}: dtype {} has lanes={}; allowed: lanes=1 (vector dtypes are not supported)", arg,
                        dlpack::describe(t.dtype), t.dtype.lanes));
  const std::optional<DType> own = dlpack::to_dtype(t.dtype);
  if (!override_dtype) {
    if (!own)
      invalid(fmt::format("{}: dtype {} is not supported; allowed: {}", arg, dlpack::describe(t.dtype),
                          kAllowedDtypes));
    return *own;
  }
  const DType want = *override_dtype;
  const int bits = static_cast<int>(dtype_size(want) * 8);
  if (own == want || dlpack::is_raw_integer(t.dtype, bits)) return want;
  invalid(fmt::format("{}: dtype {} cannot be viewed as {}; allowed: a {}-bit integer tensor (raw bytes) "
                      "or a {} tensor",
                      arg, dlpack::describe(t.dtype), to_string(want), bits, to_string(want)));
}

void check_shape(const DLTensor& t, const char* arg) {
  if (t.ndim < 1 || t.ndim > TensorView::kMaxDims)
    invalid(fmt::format("{}: ndim={} is not supported; allowed: 1 to {}", arg, t.ndim, TensorView::kMaxDims));
  if (t.shape == nullptr) invalid(fmt::format("{}: shape is NULL with ndim={}; a shape array is required", arg, t.ndim));
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] < 0) invalid(fmt::format("{}: shape[{}]={} is negative; allowed: >= 0", arg, i, t.shape[i]));
  int64_t n = 0;
  if (!checked_numel(t.shape, t.ndim, &n))
    invalid(fmt::format("{}: shape [{}] has more than 2^63 elements", arg,
                        fmt::join(t.shape, t.shape + t.ndim, ", ")));
  if (t.strides)
    for (int i = 0; i < t.ndim; ++i)
      if (t.strides[i] < 0)
        // Kernels address with unsigned offsets; a reversed view must be copied first.
        invalid(fmt::format("{}: strides[{}]={} is negative; allowed: >= 0 (elements)", arg, i, t.strides[i]));
}

void fill_row_major(TensorView& v) {
  int64_t stride = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    v.strides[i] = stride;
    stride *= v.shape[i];
  }
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

std::string TensorView::describe() const {
  return fmt::format("{}[{}] strides [{}] on cuda:{}", to_string(dtype),
                     fmt::join(shape.begin(), shape.begin() + ndim, ", "),
                     fmt::join(strides.begin(), strides.begin() + ndim, ", "), device);
}

TensorView make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, int device) {
  return make_tensor(data, dtype, std::vector<int64_t>(shape), device);
}

TensorView make_tensor(void* data, DType dtype, const std::vector<int64_t>& shape, int device) {
  if (shape.size() > static_cast<size_t>(TensorView::kMaxDims))
    invalid(fmt::format("make_tensor: shape has {} dims; allowed: up to {}", shape.size(), TensorView::kMaxDims));
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) {
    if (s < 0) invalid(fmt::format("make_tensor: shape[{}]={} is negative; allowed: >= 0", i, s));
    v.shape[i++] = s;
  }
  fill_row_major(v);
  return v;
}

TensorView from_dlpack(const DLTensor* t, const char* arg) { return from_dlpack(t, arg, std::nullopt); }

TensorView from_dlpack(const DLTensor* t, const char* arg, std::optional<DType> dtype_override) {
  arg = name_or(arg);
  if (t == nullptr) invalid(fmt::format("{}: is NULL; expected a DLTensor*", arg));
  check_device(*t, arg);
  TensorView v;
  v.dtype = check_dtype(*t, arg, dtype_override);
  check_shape(*t, arg);

  v.ndim = t->ndim;
  for (int i = 0; i < v.ndim; ++i) v.shape[i] = t->shape[i];
  if (t->strides) {
    for (int i = 0; i < v.ndim; ++i) v.strides[i] = t->strides[i];
  } else {
    fill_row_major(v);  // DLPack: NULL strides means compact row-major
  }
  v.device = t->device.device_id;
  // A NULL data pointer is legal here: plan-time callers describe shapes only.
  v.data = t->data ? static_cast<char*>(t->data) + t->byte_offset : nullptr;
  return v;
}

}  // namespace attnjit

#include "api/c_api_device_vectors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "api/dlpack_codes.hpp"
#include "attnjit/error.hpp"
#include "invalid_argument.hpp"

namespace attnjit::capi {

namespace {

bool same(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

std::string shape_text(const DLTensor& t) {
  if (t.shape == nullptr) return fmt::format("NULL (ndim={})", t.ndim);
  return fmt::format("{}", std::vector<int64_t>(t.shape, t.shape + std::max(t.ndim, 0)));
}

// NULL, the device type and the dtype: the checks every device array starts with.
void check_device_dtype(const DLTensor* t, const char* arg, const std::vector<DLDataType>& dtypes,
                        const char* allowed_dtypes) {
  if (t == nullptr) invalid(fmt::format("{}: is NULL; expected a DLTensor* of {}", arg, allowed_dtypes));
  const int type = static_cast<int>(t->device.device_type);
  if (type != kDLCUDA)
    invalid(fmt::format("{}: device_type={} ({}) is not allowed; allowed: kDLCUDA (it is read by the kernel)", arg,
                        type, dlpack::device_type_name(type)));
  if (std::none_of(dtypes.begin(), dtypes.end(), [&](DLDataType d) { return same(d, t->dtype); }))
    invalid(fmt::format("{}: dtype {} is not allowed; allowed: {}", arg, dlpack::describe(t->dtype), allowed_dtypes));
}

void check_same_device(const DLTensor& t, const char* arg, const char* owner, int device) {
  if (t.device.device_id != device)
    invalid(fmt::format("{}: device cuda:{} differs from {}'s device cuda:{}; they must be equal", arg,
                        t.device.device_id, owner, device));
}

// The first element's address (byte_offset applied), aligned to the element
// size; NULL data only for an empty array.
const void* element_data(const DLTensor& t, const char* arg, int64_t length) {
  if (t.data == nullptr) {
    if (length > 0) invalid(fmt::format("{}: data is NULL for {} elements", arg, length));
    return nullptr;  // nothing to read
  }
  const char* data = static_cast<const char*>(t.data) + t.byte_offset;
  check_element_alignment(data, std::max(1u, unsigned(t.dtype.bits) / 8u), arg);
  return data;
}

}  // namespace

void check_element_alignment(const void* data, unsigned element_bytes, const char* arg) {
  if (reinterpret_cast<uintptr_t>(data) % element_bytes != 0)
    invalid(fmt::format("{}: address {} is not allowed; allowed: a multiple of {} bytes (the element size)", arg,
                        data, element_bytes));
}

const void* device_vector(const DLTensor* t, const char* arg, const DeviceVectorRule& rule) {
  check_device_dtype(t, arg, rule.dtypes, rule.allowed_dtypes);
  if (t->ndim != 1 || t->shape == nullptr || t->shape[0] != rule.length)
    invalid(fmt::format("{}: shape {} is not allowed; allowed: [{}] with {}={} from {}", arg, shape_text(*t),
                        rule.length_name, rule.length_name, rule.length, rule.owner));
  check_same_device(*t, arg, rule.owner, rule.device);
  // The kernels read entry i at data[i]: a stride matters only past one entry.
  if (t->strides && rule.length > 1 && t->strides[0] != 1)
    invalid(fmt::format("{}: strides [{}] are not allowed for shape [{}]; allowed: contiguous (stride 1)", arg,
                        t->strides[0], rule.length));
  return element_data(*t, arg, rule.length);
}

const float* device_float32_scalar(const DLTensor* t, const char* arg, const char* owner, int device) {
  check_device_dtype(t, arg, {DLDataType{kDLFloat, 32, 1}}, "float32 (kDLFloat, 32)");
  const bool scalar = t->ndim == 0 || (t->ndim == 1 && t->shape != nullptr && t->shape[0] == 1);
  if (!scalar)
    invalid(fmt::format("{}: shape {} is not allowed; allowed: [] or [1] (one float32 value)", arg, shape_text(*t)));
  check_same_device(*t, arg, owner, device);
  return static_cast<const float*>(element_data(*t, arg, 1));
}

}  // namespace attnjit::capi

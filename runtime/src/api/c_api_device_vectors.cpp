#include "api/c_api_device_vectors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "api/dlpack_codes.hpp"
#include "attnjit/error.hpp"

namespace attnjit::capi {

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw Error(Status::InvalidArgument, msg); }

bool same(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

std::string shape_text(const DLTensor& t) {
  if (t.shape == nullptr) return fmt::format("NULL (ndim={})", t.ndim);
  return fmt::format("{}", std::vector<int64_t>(t.shape, t.shape + std::max(t.ndim, 0)));
}

}  // namespace

const void* device_vector(const DLTensor* t, const char* arg, const DeviceVectorRule& rule) {
  if (t == nullptr) invalid(fmt::format("{}: is NULL; expected a DLTensor* of {}", arg, rule.allowed_dtypes));
  const int type = static_cast<int>(t->device.device_type);
  if (type != kDLCUDA)
    invalid(fmt::format("{}: device_type={} ({}) is not allowed; allowed: kDLCUDA (it is read by the kernel)", arg,
                        type, dlpack::device_type_name(type)));
  if (std::none_of(rule.dtypes.begin(), rule.dtypes.end(), [&](DLDataType d) { return same(d, t->dtype); }))
    invalid(fmt::format("{}: dtype {} is not allowed; allowed: {}", arg, dlpack::describe(t->dtype),
                        rule.allowed_dtypes));
  if (t->ndim != 1 || t->shape == nullptr || t->shape[0] != rule.length)
    invalid(fmt::format("{}: shape {} is not allowed; allowed: [{}] with {}={} from {}", arg, shape_text(*t),
                        rule.length_name, rule.length_name, rule.length, rule.owner));
  if (t->device.device_id != rule.device)
    invalid(fmt::format("{}: device cuda:{} differs from {}'s device cuda:{}; they must be equal", arg,
                        t->device.device_id, rule.owner, rule.device));
  // The kernels read entry i at data[i]: a stride matters only past one entry.
  if (t->strides && rule.length > 1 && t->strides[0] != 1)
    invalid(fmt::format("{}: strides [{}] are not allowed for shape [{}]; allowed: contiguous (stride 1)", arg,
                        t->strides[0], rule.length));
  if (t->data == nullptr) {
    if (rule.length > 0) invalid(fmt::format("{}: data is NULL for {} elements", arg, rule.length));
    return nullptr;  // nothing to read
  }
  const char* data = static_cast<const char*>(t->data) + t->byte_offset;
  const unsigned element_bytes = std::max(1u, unsigned(t->dtype.bits) / 8u);
  if (reinterpret_cast<uintptr_t>(data) % element_bytes != 0)
    invalid(fmt::format("{}: address {} is not allowed; allowed: a multiple of {} bytes (the element size)", arg,
                        static_cast<const void*>(data), element_bytes));
  return data;
}

}  // namespace attnjit::capi

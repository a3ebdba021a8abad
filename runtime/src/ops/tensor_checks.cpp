#include "ops/tensor_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <vector>

#include "attnjit/error.hpp"

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

}  // namespace attnjit::ops

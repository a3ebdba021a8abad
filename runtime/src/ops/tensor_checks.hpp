// Argument checks shared by the operators' run(): each failure names the
// tensor, what it is and what the plan expects.
#pragma once
#include <initializer_list>
#include <vector>

#include "attnjit/tensor.hpp"

namespace attnjit::ops {

// dtype, device, exact shape, unit stride in the last dim, and alignment of the
// base pointer and every stride to `align_bytes` (vector loads and stores).
void check_tensor(const TensorView& t, const char* name, DType dtype, int device,
                  std::initializer_list<int64_t> shape, int align_bytes);
void check_tensor(const TensorView& t, const char* name, DType dtype, int device, const std::vector<int64_t>& shape,
                  int align_bytes);

}  // namespace attnjit::ops

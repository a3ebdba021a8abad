// Argument checks shared by the operators' run(): each failure names the
// tensor, what it is and what the plan expects.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "attnjit/tensor.hpp"

namespace attnjit::ops {

// dtype, device, exact shape, unit stride in the last dim, and alignment of the
// base pointer and every stride to `align_bytes` (vector loads and stores).
void check_tensor(const TensorView& t, const char* name, DType dtype, int device,
                  std::initializer_list<int64_t> shape, int align_bytes);
void check_tensor(const TensorView& t, const char* name, DType dtype, int device, const std::vector<int64_t>& shape,
                  int align_bytes);

// A tensor's shape as messages print it: "[1000, 8, 128]".
std::string shape_of(const TensorView& t);
// A dimension a problem holds as an int; Error(InvalidArgument) naming the tensor, the index and its meaning.
int narrow_dim(int64_t value, const char* arg, int index, const char* meaning);
// One request's contiguous k and v beside q (single decode and prefill): 3 dims each per
// kv_layout, equal shapes and dtypes, q's head_dim (its last dim), q's device.
void check_contiguous_kv(const TensorView& q, const TensorView& k, const TensorView& v, KVLayout kv_layout);
// What a single-request problem reads from its checked k (KV heads, length,
// dtype) and q (dtype, device), as check_contiguous_kv's layout has them.
template <class Problem>
void set_contiguous_kv_fields(Problem& problem, const TensorView& q, const TensorView& k, KVLayout kv_layout) {
  const bool nhd = kv_layout == KVLayout::NHD;
  problem.num_kv_heads = narrow_dim(k.shape[nhd ? 1 : 0], "k", nhd ? 1 : 0, "num_kv_heads");
  problem.kv_len = k.shape[nhd ? 0 : 1];
  problem.q_dtype = q.dtype;
  problem.kv_dtype = k.dtype;
  problem.device = q.device;
}

}  // namespace attnjit::ops

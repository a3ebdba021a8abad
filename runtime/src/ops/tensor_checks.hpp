// Argument checks shared by the operators' run(): each failure names the
// tensor, what it is and what the plan expects.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "attnjit/prefill.hpp"
#include "attnjit/tensor.hpp"

namespace attnjit::ops {

// dtype, device, exact shape, unit stride in the last dim, and alignment of the
// base pointer and every stride to `align_bytes` (vector loads and stores).
void check_tensor(const TensorView& t, const char* name, DType dtype, int device,
                  std::initializer_list<int64_t> shape, int align_bytes);
void check_tensor(const TensorView& t, const char* name, DType dtype, int device, const std::vector<int64_t>& shape,
                  int align_bytes);

// fp8 q's per-head scales (PrefillScales), checked: float32, contiguous 1-D
// on `device`, scale_q [num_qo_heads], scale_k / scale_v [num_kv_heads];
// Unsupported with a q that is not float8_e4m3fn. Null members: ones.
struct HeadScales {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
};
HeadScales check_head_scales(const PrefillScales* scales, DType q_dtype, int64_t num_qo_heads, int64_t num_kv_heads,
                             int device);

// A tensor's shape as messages print it: "[1000, 8, 128]".
std::string shape_of(const TensorView& t);
// A dimension a problem holds as an int; Error(InvalidArgument) naming the tensor, the index and its meaning.
int narrow_dim(int64_t value, const char* arg, int index, const char* meaning);
// One request's contiguous k and v beside q (single decode and prefill): 3 dims each per
// kv_layout, equal shapes and dtypes, q's head_dim (its last dim), q's device.
void check_contiguous_kv(const TensorView& q, const TensorView& k, const TensorView& v, KVLayout kv_layout);
// A single-request problem (single decode and prefill) from its q, k and v:
// check_contiguous_kv, then num_qo_heads and head_dim from q's last two dims,
// the KV heads, length and dtype from k (as kv_layout has them), q's dtype and
// device, and the options. The caller has checked q's ndim and sets the rest.
template <class Problem, class Options>
Problem contiguous_problem(const TensorView& q, const TensorView& k, const TensorView& v, const Options& options) {
  check_contiguous_kv(q, k, v, options.kv_layout);
  Problem problem;
  const int heads = q.ndim - 2;
  problem.num_qo_heads = narrow_dim(q.shape[heads], "q", heads, "num_qo_heads");
  problem.head_dim = narrow_dim(q.shape[heads + 1], "q", heads + 1, "head_dim");
  const bool nhd = options.kv_layout == KVLayout::NHD;
  problem.num_kv_heads = narrow_dim(k.shape[nhd ? 1 : 0], "k", nhd ? 1 : 0, "num_kv_heads");
  problem.kv_len = k.shape[nhd ? 0 : 1];
  problem.q_dtype = q.dtype;
  problem.kv_dtype = k.dtype;
  problem.device = q.device;
  problem.options = options;
  return problem;
}

}  // namespace attnjit::ops

// merge_state, merge_state_in_place, merge_states: the state-merge kernel
// (kernels/merge.cuh) with its general input addressing (merge_params.h):
// two separate states are states 0 and 1 of one row, one pointer difference apart.
#include "attnjit/merge_state.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "engine.hpp"
#include "invalid_argument.hpp"
#include "launcher.hpp"
#include "merge_params.h"
#include "ops/merge_state/merge_state_problem.hpp"
#include "ops/tensor_checks.hpp"
#include "spec/merge_kernel.hpp"

namespace attnjit {

namespace {

struct MergeJob {
  int device;
  DType dtype;
  int64_t seq, heads, head_dim;
  kernels::MergeParams p{};
};

void check_v_dtype(const TensorView& v, const char* name) {
  if (v.dtype != DType::F16 && v.dtype != DType::BF16)
    invalid(fmt::format("{}: dtype {} is not supported; allowed: float16, bfloat16", name, to_string(v.dtype)));
  if (v.shape[v.ndim - 1] != 64 && v.shape[v.ndim - 1] != 128 && v.shape[v.ndim - 1] != 256)
    throw Error(Status::Unsupported,
                fmt::format("{}: head_dim={} is not supported; supported: 64, 128, 256", name, v.shape[v.ndim - 1]));
}

// Output rows (seq, head) must be contiguous: the kernel writes row r at o + r * stride.
void set_output(MergeJob& j, const TensorView& o, const char* name, const TensorView* lse, const char* lse_name) {
  ops::check_tensor(o, name, j.dtype, j.device, {j.seq, j.heads, j.head_dim}, 16);
  if (j.seq > 1 && o.strides[0] != j.heads * o.strides[1])
    invalid(fmt::format("{}: stride(0)={} is not allowed; rows must be contiguous, stride(0) = H * stride(1) = {}", name,
                        o.strides[0], j.heads * o.strides[1]));
  j.p.o = o.data;
  j.p.o_stride_row = o.strides[1];
  if (lse) {
    ops::check_tensor(*lse, lse_name, DType::F32, j.device, {j.seq, j.heads}, 4);
    if (j.seq > 1 && lse->strides[0] != j.heads)
      invalid(fmt::format("{}: must be contiguous [seq, H] (stride(0)={})", lse_name, lse->strides[0]));
    j.p.lse = static_cast<float*>(lse->data);
  }
}

void launch(const Runtime& rt, const MergeJob& j, Stream stream) {
  const MergeKernel spec = ops::merge_state_kernel(static_cast<int>(j.head_dim), j.dtype);
  auto kernel = rt.engine().load_on_device(spec, j.device);
  const ops::LaunchShape shape = ops::merge_state_shape(spec, j.seq * j.heads);
  if (shape.grid[0] == 0) return;
  cuda::ScopedDevice scope(j.device);
  detail::launch(*kernel, shape, &j.p, stream);
}

// States a and b of [seq, H, D] views as states 0 and 1 of one row.
MergeJob two_states(const TensorView& v_a, const char* na, const TensorView& s_a, const char* nsa,
                    const TensorView& v_b, const char* nb, const TensorView& s_b, const char* nsb) {
  if (v_a.ndim != 3)
    invalid(fmt::format("{}: ndim={} is not allowed; allowed: 3, [seq, num_heads, head_dim]", na, v_a.ndim));
  check_v_dtype(v_a, na);
  MergeJob j{v_a.device, v_a.dtype, v_a.shape[0], v_a.shape[1], v_a.shape[2]};
  ops::check_tensor(v_a, na, j.dtype, j.device, {j.seq, j.heads, j.head_dim}, 16);
  ops::check_tensor(v_b, nb, j.dtype, j.device, {j.seq, j.heads, j.head_dim}, 16);
  ops::check_tensor(s_a, nsa, DType::F32, j.device, {j.seq, j.heads}, 4);
  ops::check_tensor(s_b, nsb, DType::F32, j.device, {j.seq, j.heads}, 4);
  if (v_b.strides != v_a.strides)
    invalid(fmt::format("{}: strides differ from {}'s; they must be equal ({} vs {})", nb, na, v_b.describe(),
                        v_a.describe()));
  if (s_b.strides != s_a.strides)
    invalid(fmt::format("{}: strides differ from {}'s; they must be equal", nsb, nsa));
  const int64_t es = int64_t(dtype_size(j.dtype));
  j.p.partial_o = v_a.data;
  j.p.partial_lse = static_cast<const float*>(s_a.data);
  j.p.num_rows = static_cast<int32_t>(j.seq * j.heads);
  j.p.num_splits = 2;
  j.p.heads = static_cast<int32_t>(j.heads);
  j.p.in_seq_stride = v_a.strides[0];
  j.p.in_head_stride = v_a.strides[1];
  // Unified addressing: state 1 is state 0 plus the distance between the
  // buffers (both 16-byte aligned, so a whole number of elements).
  j.p.in_state_stride = (static_cast<const char*>(v_b.data) - static_cast<const char*>(v_a.data)) / es;
  j.p.lse_seq_stride = s_a.strides[0];
  j.p.lse_head_stride = s_a.strides[1];
  j.p.lse_state_stride = (static_cast<const char*>(s_b.data) - static_cast<const char*>(s_a.data)) / 4;
  return j;
}

}  // namespace

void merge_state(const Runtime& rt, const TensorView& v_a, const TensorView& s_a, const TensorView& v_b,
                 const TensorView& s_b, const TensorView& v_merged, const TensorView* s_merged, Stream stream) {
  MergeJob j = two_states(v_a, "v_a", s_a, "s_a", v_b, "v_b", s_b, "s_b");
  set_output(j, v_merged, "v_merged", s_merged, "s_merged");
  launch(rt, j, stream);
}

void merge_state_in_place(const Runtime& rt, const TensorView& v, const TensorView& s, const TensorView& v_other,
                          const TensorView& s_other, const uint8_t* mask, Stream stream) {
  MergeJob j = two_states(v, "v", s, "s", v_other, "v_other", s_other, "s_other");
  // In place: each row is read whole by one CTA before that CTA writes it.
  set_output(j, v, "v", &s, "s");
  j.p.row_mask = mask;
  launch(rt, j, stream);
}

void merge_states(const Runtime& rt, const TensorView& v, const TensorView& s, const TensorView& v_merged,
                  const TensorView* s_merged, Stream stream) {
  if (v.ndim != 4)
    invalid(fmt::format("v: ndim={} is not allowed; allowed: 4, [seq, num_states, num_heads, head_dim]", v.ndim));
  check_v_dtype(v, "v");
  MergeJob j{v.device, v.dtype, v.shape[0], v.shape[2], v.shape[3]};
  const int64_t ns = v.shape[1];
  if (ns < 1) invalid(fmt::format("v: num_states (shape[1])={} is not allowed; it must be >= 1", ns));
  ops::check_tensor(v, "v", j.dtype, j.device, {j.seq, ns, j.heads, j.head_dim}, 16);
  ops::check_tensor(s, "s", DType::F32, j.device, {j.seq, ns, j.heads}, 4);
  j.p.partial_o = v.data;
  j.p.partial_lse = static_cast<const float*>(s.data);
  j.p.num_rows = static_cast<int32_t>(j.seq * j.heads);
  j.p.num_splits = static_cast<int32_t>(ns);
  j.p.heads = static_cast<int32_t>(j.heads);
  j.p.in_seq_stride = v.strides[0];
  j.p.in_state_stride = v.strides[1];
  j.p.in_head_stride = v.strides[2];
  j.p.lse_seq_stride = s.strides[0];
  j.p.lse_state_stride = s.strides[1];
  j.p.lse_head_stride = s.strides[2];
  set_output(j, v_merged, "v_merged", s_merged, "s_merged");
  launch(rt, j, stream);
}

}  // namespace attnjit

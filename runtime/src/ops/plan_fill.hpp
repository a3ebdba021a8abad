// What the operators' plans share when they plan on a device and fill their
// kernels' params: the device's figures, the split states in the caller's
// workspace, a contiguous K/V pair, and the merge of packed KV splits.
#pragma once
#include <cstddef>

#include "attnjit/tensor.hpp"
#include "kv_source_params.h"
#include "merge_params.h"
#include "ops/operator.hpp"

namespace attnjit {
class Runtime;
}

namespace attnjit::ops {

// SM count, the arch its kernels compile for, and the opt-in shared memory per block.
DeviceFigures device_figures(const Runtime& rt, int device);

// The "partial_o" and "partial_lse" scratch regions in the caller's
// workspace, or nulls when the plan has none (no KV split).
struct PartialStates {
  float* o = nullptr;
  float* lse = nullptr;
};
PartialStates partial_states(void* workspace, const WorkspaceLayout& layout, bool has_them);

// A run's caller-given scratch: nothing to check when the plan needs none
// (needed 0), else non-null (the error names kv_splits where > 0), at least
// `needed` bytes and 256-byte aligned.
void check_float_workspace(const void* workspace, size_t bytes, size_t needed, int kv_splits = 0);

// A kernel's q, o and lse (null: none) pointers and, where it has them, its
// partial states in the caller's workspace, which it returns.
template <class Params>
PartialStates set_outputs(Params& params, const TensorView& q, const TensorView& o, const TensorView* lse,
                          void* workspace, const WorkspaceLayout& layout, bool has_partial_states) {
  params.q = q.data;
  params.o = o.data;
  params.lse = lse ? static_cast<float*>(lse->data) : nullptr;
  const PartialStates partial = partial_states(workspace, layout, has_partial_states);
  params.partial_o = partial.o;
  params.partial_lse = partial.lse;
  return partial;
}

// A prefill kernel's outputs as set_outputs sets them, and the row (n) and
// head (h) strides of its q and o, both [rows, heads, dim].
template <class Params>
PartialStates set_prefill_outputs(Params& params, const TensorView& q, const TensorView& o, const TensorView* lse,
                                  void* workspace, const WorkspaceLayout& layout, bool has_partial_states) {
  const PartialStates partial = set_outputs(params, q, o, lse, workspace, layout, has_partial_states);
  params.q_stride_n = q.strides[0];
  params.q_stride_h = q.strides[1];
  params.o_stride_n = o.strides[0];
  params.o_stride_h = o.strides[1];
  return partial;
}

// One request's K and V as [rows, heads, dim] (NHD) or [heads, rows, dim] (HND):
// the contiguous source's pointers, strides and length.
void set_contiguous_kv(kernels::KVSourceParams& kv, const TensorView& k, const TensorView& v, KVLayout layout,
                       int64_t rows);

// The merge of num_splits packed split states per row into o and lse (null:
// none), rows o_stride_row apart; the caller adds what its layout has more.
kernels::MergeParams packed_split_merge(const PartialStates& partial, const TensorView& o, float* lse,
                                        int64_t o_stride_row, int32_t num_rows, int32_t num_splits);

}  // namespace attnjit::ops

#include "ops/plan_fill.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "attnjit/error.hpp"
#include "attnjit/runtime.hpp"
#include "engine.hpp"

namespace attnjit::ops {

DeviceFigures device_figures(const Runtime& rt, int device) {
  auto& engine = rt.engine();
  DeviceFigures figures;
  figures.sm_count = engine.sm_count(device);
  figures.arch = engine.arch_of(device);
  figures.smem_per_block = engine.smem_per_block(device);  // a kernel that would need more is refused or replaced
  figures.persistent_prefill = rt.config().persistent_prefill;
  return figures;
}

PartialStates partial_states(void* workspace, const WorkspaceLayout& layout, bool has_them) {
  if (!has_them) return {};
  return {scratch_ptr<float>(workspace, layout.region("partial_o")),
          scratch_ptr<float>(workspace, layout.region("partial_lse"))};
}

void check_float_workspace(const void* workspace, size_t bytes, size_t needed, int kv_splits) {
  if (needed == 0) return;
  if (!workspace)
    throw Error(Status::WorkspaceTooSmall,
                kv_splits > 0
                    ? fmt::format("workspace is null; this plan ({} KV splits) needs {} bytes", kv_splits, needed)
                    : fmt::format("workspace is null; this plan needs {} bytes", needed));
  if (bytes < needed)
    throw Error(Status::WorkspaceTooSmall,
                fmt::format("workspace_bytes={} is too small; this plan needs {} bytes", bytes, needed));
  if (reinterpret_cast<uintptr_t>(workspace) % WorkspaceLayout::kAlign != 0)
    throw Error(Status::InvalidArgument, "workspace must be 256-byte aligned");
}

void set_contiguous_kv(kernels::KVSourceParams& kv, const TensorView& k, const TensorView& v, KVLayout layout,
                       int64_t rows) {
  const bool nhd = layout == KVLayout::NHD;
  kv.k = k.data;
  kv.v = v.data;
  kv.k_stride_row = nhd ? k.strides[0] : k.strides[1];
  kv.k_stride_head = nhd ? k.strides[1] : k.strides[0];
  kv.v_stride_row = nhd ? v.strides[0] : v.strides[1];
  kv.v_stride_head = nhd ? v.strides[1] : v.strides[0];
  kv.kv_len = static_cast<int32_t>(rows);
}

kernels::MergeParams packed_split_merge(const PartialStates& partial, const TensorView& o, float* lse,
                                        int64_t o_stride_row, int32_t num_rows, int32_t num_splits) {
  kernels::MergeParams mp{};
  mp.partial_o = partial.o;
  mp.partial_lse = partial.lse;
  mp.o = o.data;
  mp.lse = lse;
  mp.o_stride_row = o_stride_row;
  mp.num_rows = num_rows;
  mp.num_splits = num_splits;
  return mp;
}

}  // namespace attnjit::ops

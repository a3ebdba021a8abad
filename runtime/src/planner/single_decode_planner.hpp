// Every shape-dependent decision for single decode: which kernels, tile
// sizes, how the KV is split across CTAs, and the workspace layout. Pure host
// code, deterministic, and it needs no compiled kernel: the device enters only
// as figures (SM count, resident CTAs per SM).
#pragma once
#include <optional>
#include <string>

#include "attnjit/single_decode.hpp"
#include "decode_params.h"
#include "kernel_spec.hpp"
#include "launcher.hpp"

namespace attnjit::planner {

struct DeviceFigures {
  int sm_count = 132;  // H100 SXM / H200
};

struct SingleDecodeLayout {
  KernelSpec decode;
  std::optional<KernelSpec> merge;   // present when num_splits > 1
  detail::LaunchShape decode_shape, merge_shape;
  int num_splits = 1;
  int chunk_size = 0;
  int kv_begin = 0;
  // Workspace: named offsets, 256-byte aligned.
  size_t partial_o_offset = 0, partial_lse_offset = 0, workspace_bytes = 0;
  // Run-time scalars, resolved from the options' defaults.
  float sm_scale = 0, v_scale = 1, soft_cap = 0, rope_rcp_scale = 1, rope_log2_theta = 0;
};

// Throws Error(InvalidArgument / Unsupported) naming the offending field.
void validate(const SingleDecodeProblem& p);
SingleDecodeLayout plan_single_decode(const SingleDecodeProblem& p, const DeviceFigures& device);
// The kernels a problem needs regardless of kv_len (prewarm): decode and merge.
std::vector<KernelSpec> kernels_for(const SingleDecodeProblem& p);

}  // namespace attnjit::planner

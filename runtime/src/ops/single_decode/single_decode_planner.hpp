// Every shape-dependent decision for single decode: which kernels, tile
// sizes, how the KV is split across CTAs, and the workspace layout. Pure host
// code, deterministic, and it needs no compiled kernel: the device enters only
// as figures (SM count, shared memory per block).
#pragma once
#include <optional>
#include <vector>

#include "attnjit/single_decode.hpp"
#include "ops/operator.hpp"

namespace attnjit::ops {

struct SingleDecodeLayout {
  KernelLaunch decode;
  std::optional<KernelLaunch> merge;  // present when num_splits > 1
  WorkspaceLayout workspace;          // float regions "partial_o", "partial_lse" when split
  int num_splits = 1;
  int chunk_size = 0;
  int kv_begin = 0;
  int prefetch_rows = 0;  // each CTA's first rows warmed in L2 before its PDL wait (kernels/decode_prefetch.cuh)
  // Run-time scalars, resolved from the options' defaults.
  float sm_scale = 0, v_scale = 1, soft_cap = 0, rope_rcp_scale = 1, rope_log2_theta = 0;

  nlohmann::json to_json() const;  // for describe() and `explain`
};

// Validates, then plans.
SingleDecodeLayout plan_single_decode(const SingleDecodeProblem& problem, const DeviceFigures& device);
// The kernels a problem needs regardless of kv_len (prewarm): decode and merge.
std::vector<KernelSpec> single_decode_kernels(const SingleDecodeProblem& problem);

}  // namespace attnjit::ops

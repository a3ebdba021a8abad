#include "ops/batch_prefill/batch_prefill_kernels.hpp"

#include <cstdint>
#include <set>

#include "ops/attention_options/prefill_options.hpp"
#include "ops/attention_options/user_variant_options.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "spec/block_mask_kernel.hpp"
#include "ops/split_states.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"

namespace attnjit::ops {

std::vector<KernelSpec> batch_prefill_kernels(const BatchPrefillProblem& p) {
  validate(p);
  std::vector<KernelSpec> out;
  auto base = [&](PrefillBackend backend) {
    PrefillKernel k = prefill_variant(p.options, p.head_dim, p.q_dtype, p.kv_dtype);
    k.backend = backend;
    k.kv_source = p.source;
    return k;
  };
  // fa2 ("fa2", or "auto" off Hopper or with fp8 K/V): the tile follows the
  // batch's longest packed query, from the shortest to the longest there is.
  const bool fp8 = p.q_dtype == DType::E4M3;  // fa3_ws only
  if (p.options.backend != "fa3" && p.options.backend != "fa3_ws" && !fp8) {
    const std::set<int> frags = {prefill_frags_m(p.head_dim, 0), prefill_frags_m(p.head_dim, INT64_MAX)};
    for (int fm : frags) {
      PrefillKernel k = base(PrefillBackend::Fa2);
      k.frags_m = fm;
      choose_prefill_pipeline(k);
      out.emplace_back(k);
    }
  }
  // The Hopper skeleton ("fa3", "fa3_ws", or "auto" on sm_90a: fa3_ws where
  // it serves the variant) takes 16-bit K/V only. fa3: two warpgroups, or one
  // where a small grid would leave SMs idle (not in CUDA-graph mode, whose
  // kernel is fixed before the lengths are known).
  if (p.options.backend != "fa2" && (dtype_size(p.kv_dtype) == 2 || fp8) && fa3_takes_head_dim(p.head_dim)) {
    PrefillKernel k = base(PrefillBackend::Fa3);
    k.warp_specialized = prefill_warp_specialized(k, p.options);
    fit_batch_block_sparse(k, p.use_cuda_graph);
    choose_prefill_pipeline(k);
    // The persistence the runtime plans by default (CUDA-graph mode: none).
    if (!p.use_cuda_graph) choose_prefill_persistence(k, DeviceFigures{}, prefill_costs_fall(p.options, k));
    out.emplace_back(k);
    if (!p.use_cuda_graph && !k.warp_specialized) {
      fit_fa3_tile(k, 0, 1);  // the narrowing the planner applies to a grid of few tiles
      out.emplace_back(k);
    }
  }
  // A KV split merges its partial states (fp32) into o; CUDA-graph mode never splits.
  if (!p.use_cuda_graph) {
    out.emplace_back(split_merge_kernel(p.head_dim, prefill_o_dtype(p.options, p.q_dtype)));
  }
  const auto& user = p.options.variant;
  if (user && user->source().block_sparse) {
    PrefillKernel k = base(PrefillBackend::Fa2);
    fit_batch_block_sparse(k, p.use_cuda_graph);  // CUDA-graph mode: refused by name
    out.emplace_back(BlockMaskKernel{user->shared_source()});
  }
  return out;
}

}  // namespace attnjit::ops

// single_decode_with_kv_cache: plan (validate, choose kernels and split, make
// them ready on the device) and run (check tensors, fill params, launch).
#include "attnjit/single_decode.hpp"

#include <fmt/format.h>

#include "arch.hpp"
#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "decode_params.h"
#include "engine.hpp"
#include "launcher.hpp"
#include "merge_params.h"
#include "ops/attention_options/user_variant_options.hpp"
#include "ops/decode_choice.hpp"
#include "ops/memoized_plan.hpp"
#include "ops/plan_fill.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_decode/single_decode_problem.hpp"
#include "ops/tensor_checks.hpp"

namespace attnjit {

struct SingleDecodePlan::Impl {
  SingleDecodeProblem problem;
  ops::SingleDecodeLayout layout;
  std::shared_ptr<detail::Kernel> decode, merge;
  // Programmatic dependent launch (sm_90 and newer): the merge launches while
  // the decode CTAs finish (both kernels wait in griddepcontrol.wait before
  // reading what the kernel before wrote), which hides its launch gap; the
  // kernels are the batch decode's, which TensorRT-LLM's entry point
  // launches this way.
  bool pdl = false;
};

SingleDecodePlan::SingleDecodePlan(const Runtime& rt, const SingleDecodeProblem& problem)
    : impl_(std::make_unique<Impl>()) {
  auto& engine = rt.engine();
  impl_->problem = problem;
  impl_->layout = ops::plan_single_decode(problem, ops::device_figures(rt, problem.device));  // validates
  impl_->decode = engine.load_on_device(impl_->layout.decode.spec, problem.device);
  if (impl_->layout.merge) impl_->merge = engine.load_on_device(impl_->layout.merge->spec, problem.device);
  impl_->pdl = has_pdl(engine.arch_of(problem.device));
}

SingleDecodePlan::~SingleDecodePlan() = default;
SingleDecodePlan::SingleDecodePlan(SingleDecodePlan&&) noexcept = default;
SingleDecodePlan& SingleDecodePlan::operator=(SingleDecodePlan&&) noexcept = default;

const SingleDecodeProblem& SingleDecodePlan::problem() const { return impl_->problem; }
size_t SingleDecodePlan::workspace_bytes() const { return impl_->layout.workspace.float_bytes(); }
int SingleDecodePlan::num_splits() const { return impl_->layout.num_splits; }

std::string SingleDecodePlan::describe() const {
  const auto& layout = impl_->layout;
  std::string text = fmt::format("{} splits={} chunk={} kv_begin={}", ops::launch_text(layout.decode),
                                 layout.num_splits, layout.chunk_size, layout.kv_begin);
  if (layout.merge)
    text += fmt::format("; {} grid={} workspace={} B", layout.merge->spec.name(), layout.merge->shape.grid[0],
                        layout.workspace.float_bytes());
  return text;
}

void SingleDecodePlan::run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                           const TensorView* lse, void* workspace, size_t workspace_bytes, Stream stream,
                           const Variant* variant) const {
  const auto& problem = impl_->problem;
  const auto& layout = impl_->layout;
  const int64_t H = problem.num_qo_heads, Hk = problem.num_kv_heads, D = problem.head_dim, N = problem.kv_len;
  const int qa = 16, kva = ops::decode_kv_align_bytes(*layout.decode.spec.as<DecodeKernel>());
  ops::check_tensor(q, "q", problem.q_dtype, problem.device, {H, D}, qa);
  const bool nhd = problem.options.kv_layout == KVLayout::NHD;
  ops::check_tensor(k, "k", problem.kv_dtype, problem.device,
                    nhd ? std::initializer_list<int64_t>{N, Hk, D} : std::initializer_list<int64_t>{Hk, N, D}, kva);
  ops::check_tensor(v, "v", problem.kv_dtype, problem.device,
                    nhd ? std::initializer_list<int64_t>{N, Hk, D} : std::initializer_list<int64_t>{Hk, N, D}, kva);
  ops::check_tensor(o, "o", problem.q_dtype, problem.device, {H, D}, qa);
  if (lse) ops::check_tensor(*lse, "lse", DType::F32, problem.device, {H}, 4);
  ops::check_float_workspace(workspace, workspace_bytes, layout.workspace.float_bytes(), layout.num_splits);

  kernels::DecodeParams dp{};
  const bool split = layout.num_splits > 1;
  const ops::PartialStates partial = ops::set_outputs(dp, q, o, lse, workspace, layout.workspace, split);
  dp.q_stride_h = q.strides[0];
  dp.o_stride_h = o.strides[0];
  ops::set_contiguous_kv(dp.kv, k, v, problem.options.kv_layout, N);
  dp.var.sm_scale = layout.sm_scale;
  dp.var.v_scale = layout.v_scale;
  dp.var.soft_cap = layout.soft_cap;
  dp.var.rope_rcp_scale = layout.rope_rcp_scale;
  dp.var.rope_log2_theta = layout.rope_log2_theta;
  // Decode variants do not check the window per row: their rows start at it.
  dp.var.window_left = problem.options.window_left;
  ops::pack_user_params(problem.options.variant ? &problem.options.variant->source() : nullptr,
                        variant ? variant : problem.options.variant.get(), dp.var, problem.device);
  dp.kv_len = static_cast<int32_t>(N);  // the kernel starts at the window itself (decode_work.cuh), as layout.kv_begin
  dp.chunk_size = layout.chunk_size;
  dp.num_splits = layout.num_splits;
  dp.num_requests = 1;
  dp.num_qo_heads = static_cast<int32_t>(H);
  dp.group_size = static_cast<int32_t>(H / Hk);
  dp.q_len = 1;  // one query token (kernels/decode_queries.cuh)
  dp.prefetch_rows = layout.prefetch_rows;
  dp.prefetch_items = layout.num_splits;  // one wave

  cuda::ScopedDevice scope(problem.device);
  detail::launch(*impl_->decode, layout.decode.shape, &dp, stream, impl_->pdl);
  if (split) {
    kernels::MergeParams mp =
        ops::packed_split_merge(partial, o, dp.lse, o.strides[0], static_cast<int32_t>(H), layout.num_splits);
    mp.rows_per_request = static_cast<int32_t>(H);  // one request
    detail::launch(*impl_->merge, layout.merge->shape, &mp, stream, impl_->pdl);
  }
}

void single_decode_with_kv_cache(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                                 const TensorView& o, const TensorView* lse, const SingleDecodeOptions& options,
                                 Stream stream, void* workspace, size_t workspace_bytes) {
  SingleDecodeOptions opts = options;
  opts.return_lse = lse != nullptr;
  // The memo keeps the source only: each call packs the values of the variant it was given.
  if (opts.variant) opts.variant = std::make_shared<const Variant>(opts.variant->source());
  const SingleDecodeProblem problem = ops::single_decode_problem_from_tensors(q, k, v, opts);

  const auto plan = ops::memoized_plan<SingleDecodePlan>(rt, ops::to_json(problem).dump(), problem);
  if (workspace || plan->workspace_bytes() == 0) {
    plan->run(q, k, v, o, lse, workspace, workspace_bytes, stream, options.variant.get());
    return;
  }
  // A buffer of this call's own, busy until the GPU is done with it.
  auto lease = rt.engine().workspace_pool(problem.device).acquire(plan->workspace_bytes(), stream);
  plan->run(q, k, v, o, lse, lease.get(), lease.bytes(), stream, options.variant.get());
}

}  // namespace attnjit

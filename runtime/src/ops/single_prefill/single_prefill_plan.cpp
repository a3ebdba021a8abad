// single_prefill_with_kv_cache: plan (validate, tile, split, make kernels
// ready) and run (check tensors, fill params, launch).
#include <fmt/format.h>

#include <cstring>

#include "attnjit/error.hpp"
#include "attnjit/prefill.hpp"
#include "cuda/driver.hpp"
#include "engine.hpp"
#include "launcher.hpp"
#include "ops/attention_options/prefill_options.hpp"
#include "ops/attention_options/user_variant_options.hpp"
#include "ops/block_mask_keep.hpp"
#include "ops/plan_fill.hpp"
#include "ops/prefill_launch.hpp"
#include "merge_params.h"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "ops/single_prefill/single_prefill_problem.hpp"
#include "ops/tensor_checks.hpp"
#include "block_mask_params.h"
#include "prefill_params.h"

namespace attnjit {

struct SinglePrefillPlan::Impl {
  SinglePrefillProblem problem;
  ops::SinglePrefillLayout layout;
  std::shared_ptr<detail::Kernel> prefill, merge, block_mask;
  std::unique_ptr<ops::BlockMaskKeep> kept_classes;  // runs of a Reclassify::OnBind variant
};

SinglePrefillPlan::SinglePrefillPlan(const Runtime& rt, const SinglePrefillProblem& problem)
    : impl_(std::make_unique<Impl>()) {
  ops::validate(problem);  // before the device is asked anything: bad input fails the same everywhere
  auto& engine = rt.engine();
  impl_->problem = problem;
  impl_->layout = ops::plan_single_prefill(problem, ops::device_figures(rt, problem.device));  // validates
  impl_->prefill = engine.load_on_device(impl_->layout.prefill.spec, problem.device);
  if (impl_->layout.merge) impl_->merge = engine.load_on_device(impl_->layout.merge->spec, problem.device);
  if (impl_->layout.block_mask) {
    impl_->block_mask = engine.load_on_device(impl_->layout.block_mask->spec, problem.device);
    impl_->kept_classes = std::make_unique<ops::BlockMaskKeep>(problem.device);
    impl_->kept_classes->resize(impl_->layout.workspace.region("block_mask").bytes);
  }
}

SinglePrefillPlan::~SinglePrefillPlan() = default;
SinglePrefillPlan::SinglePrefillPlan(SinglePrefillPlan&&) noexcept = default;
SinglePrefillPlan& SinglePrefillPlan::operator=(SinglePrefillPlan&&) noexcept = default;

const SinglePrefillProblem& SinglePrefillPlan::problem() const { return impl_->problem; }
size_t SinglePrefillPlan::workspace_bytes() const { return impl_->layout.workspace.float_bytes(); }
int SinglePrefillPlan::num_kv_chunks() const { return impl_->layout.num_chunks; }

std::string SinglePrefillPlan::describe() const {
  const auto& layout = impl_->layout;
  const auto& d = layout.prefill;
  std::string text = fmt::format("{} grid=({},{},{}) threads={} smem={} chunks={} chunk={}", d.spec.name(),
                                 d.shape.grid[0], d.shape.grid[1], d.shape.grid[2], d.shape.threads, d.shape.smem_bytes,
                                 layout.num_chunks, layout.chunk_size);
  if (layout.block_mask)
    text += fmt::format("; {} grid=({},{}) first, block_mask {} B of the workspace", layout.block_mask->spec.name(),
                        layout.block_mask->shape.grid[0], layout.block_mask->shape.grid[1],
                        layout.workspace.region("block_mask").bytes);
  if (layout.merge)
    text += fmt::format("; {} grid={} workspace={} B", layout.merge->spec.name(), layout.merge->shape.grid[0],
                        layout.workspace.float_bytes());
  return text;
}

void SinglePrefillPlan::run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                            const TensorView* lse, const PackedMask* mask, void* workspace, size_t workspace_bytes,
                            Stream stream, const Variant* variant, const PrefillScales* scales) const {
  const auto& problem = impl_->problem;
  const auto& layout = impl_->layout;
  const int64_t H = problem.num_qo_heads, Hk = problem.num_kv_heads, D = problem.head_dim, M = problem.qo_len,
                N = problem.kv_len;
  const bool nhd = problem.options.kv_layout == KVLayout::NHD;
  ops::check_tensor(q, "q", problem.q_dtype, problem.device, {M, H, D}, 16);
  // A vector, not an initializer_list: one kept in a variable outlives its array.
  const std::vector<int64_t> kv_shape = nhd ? std::vector<int64_t>{N, Hk, D} : std::vector<int64_t>{Hk, N, D};
  ops::check_tensor(k, "k", problem.kv_dtype, problem.device, kv_shape, 16);
  ops::check_tensor(v, "v", problem.kv_dtype, problem.device, kv_shape, 16);
  ops::check_tensor(o, "o", ops::prefill_o_dtype(problem.options, problem.q_dtype), problem.device, {M, H, D}, 16);
  const ops::HeadScales head_scales = ops::check_head_scales(scales, problem.q_dtype, H, Hk, problem.device);
  // The merge kernel addresses output rows (token, head) with one stride.
  if (M > 1 && o.strides[0] != H * o.strides[1])
    throw Error(Status::InvalidArgument,
                fmt::format("o: stride(0)={} is not allowed; rows must be contiguous, stride(0) = num_qo_heads * "
                            "stride(1) = {} (got {})",
                            o.strides[0], H * o.strides[1], o.describe()));
  if (lse) ops::check_tensor(*lse, "lse", DType::F32, problem.device, {M, H}, 4);
  if (lse && M > 1 && lse->strides[0] != H)
    throw Error(Status::InvalidArgument, fmt::format("lse: must be contiguous [qo_len, num_qo_heads] (got {})",
                                                     lse->describe()));
  ops::check_custom_mask(problem, mask);
  const size_t needed = layout.workspace.float_bytes();
  if (needed > 0) {
    if (!workspace || workspace_bytes < needed)
      throw Error(Status::WorkspaceTooSmall,
                  fmt::format("workspace_bytes={} is too small; this plan ({} KV chunks) needs {} bytes",
                              workspace ? workspace_bytes : 0, layout.num_chunks, needed));
    if (reinterpret_cast<uintptr_t>(workspace) % ops::WorkspaceLayout::kAlign != 0)
      throw Error(Status::InvalidArgument, "workspace must be 256-byte aligned");
  }

  kernels::PrefillParams pp{};
  const bool split = layout.num_chunks > 1;
  const ops::PartialStates partial = ops::set_prefill_outputs(pp, q, o, lse, workspace, layout.workspace, split);
  ops::set_contiguous_kv(pp.kv, k, v, problem.options.kv_layout, N);
  pp.var = layout.var;
  pp.scale_q = head_scales.q;
  pp.scale_k = head_scales.k;
  pp.scale_v = head_scales.v;
  pp.var.custom_mask = problem.options.custom_mask ? static_cast<const uint8_t*>(mask->data) : nullptr;
  ops::pack_user_params(problem.options.variant ? &problem.options.variant->source() : nullptr,
                        variant ? variant : problem.options.variant.get(), pp.var, problem.device);
  pp.qo_len = static_cast<int32_t>(M);
  pp.num_work = layout.num_q_tiles;  // no list: the grid's tiles (prefill_work)
  pp.tiles_fastest = layout.tiles_fastest;
  pp.num_qo_heads = static_cast<int32_t>(H);
  pp.group = FastDivmod(static_cast<uint32_t>(H / Hk));
  pp.chunk_size = layout.chunk_size;
  pp.num_chunks = layout.num_chunks;
  pp.num_rows = static_cast<int32_t>(M * H);

  cuda::ScopedDevice scope(problem.device);
  ops::BlockMaskKeep::Use kept;
  if (layout.block_mask) {
    // The classes of this run's bound values, before the kernel that walks them (same stream):
    // classified now into the workspace, or under on_bind kept from an earlier run of these values.
    const Variant& given = variant ? *variant : *problem.options.variant;
    if (given.source().reclassify == Reclassify::OnBind)
      kept = impl_->kept_classes->use(stream, given.values_version());
    kernels::BlockMaskParams bp{};
    const int64_t rows = layout.num_q_tiles, slots = layout.block_mask_slots;
    auto* region = kept.kept() ? kept.kept()
                               : ops::scratch_ptr<int32_t>(workspace, layout.workspace.region("block_mask"));
    bp.counts = region;
    bp.tiles = region + rows * slots;
    bp.stride = layout.block_mask_stride;
    bp.slots = static_cast<int32_t>(slots);
    bp.qo_len = static_cast<int32_t>(M);
    bp.kv_len = static_cast<int32_t>(N);
    bp.tile_q = layout.prefill.spec.as<PrefillKernel>()->tile_q();
    bp.tile_kv = layout.prefill.spec.as<PrefillKernel>()->tile_kv();
    bp.group = pp.group;
    bp.heads_vary = given.source().heads_vary ? 1 : 0;
    std::memcpy(bp.user_params, pp.var.user_params, sizeof(bp.user_params));
    if (rows > 0 && kept.classify()) detail::launch(*impl_->block_mask, layout.block_mask->shape, &bp, stream);
    kernels::block_tiles(pp.var) = {bp.tiles, bp.counts, nullptr, bp.stride, bp.slots};
  }
  ops::launch_prefill(*impl_->prefill, layout.prefill.shape, pp, stream);
  if (split) {
    const kernels::MergeParams mp =
        ops::packed_split_merge(partial, o, pp.lse, o.strides[1], pp.num_rows, layout.num_chunks);
    detail::launch(*impl_->merge, layout.merge->shape, &mp, stream);
  }
  kept.launched();
}

namespace {
// The plan for these tensors and options, made once per problem and kept by the engine.
std::shared_ptr<const SinglePrefillPlan> memoized_plan(const Runtime& rt, const TensorView& q, const TensorView& k,
                                                       const TensorView& v, const PrefillOptions& options,
                                                       bool has_lse, bool has_mask, std::optional<DType> o_dtype) {
  PrefillOptions opts = options;
  // o's dtype: unset where it is q's (one problem, one memo key, whichever way it came).
  opts.o_dtype = o_dtype && *o_dtype != q.dtype ? o_dtype : std::nullopt;
  opts.return_lse = has_lse;
  opts.custom_mask = has_mask;
  // The memo keeps the source only: each call packs the values of the variant it was given.
  if (opts.variant) opts.variant = std::make_shared<const Variant>(opts.variant->source());
  const SinglePrefillProblem problem = ops::single_prefill_problem_from_tensors(q, k, v, opts);
  auto& engine = rt.engine();
  const std::string key = ops::to_json(problem).dump();
  auto plan = std::static_pointer_cast<const SinglePrefillPlan>(engine.find_plan(key));
  if (!plan) {
    plan = std::make_shared<const SinglePrefillPlan>(rt, problem);
    engine.remember_plan(key, plan);
  }
  return plan;
}
}  // namespace

size_t single_prefill_workspace_bytes(const Runtime& rt, const TensorView& q, const TensorView& k,
                                      const TensorView& v, const PrefillOptions& options, bool has_lse,
                                      bool has_mask) {
  return memoized_plan(rt, q, k, v, options, has_lse, has_mask, options.o_dtype)->workspace_bytes();
}

void single_prefill_with_kv_cache(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                                  const TensorView& o, const TensorView* lse, const PrefillOptions& options,
                                  Stream stream, const PackedMask* mask, void* workspace, size_t workspace_bytes,
                                  const PrefillScales* scales) {
  const auto plan = memoized_plan(rt, q, k, v, options, lse != nullptr, mask && mask->data, o.dtype);
  if (workspace || plan->workspace_bytes() == 0) {
    plan->run(q, k, v, o, lse, mask, workspace, workspace_bytes, stream, options.variant.get(), scales);
    return;
  }
  auto lease = rt.engine().workspace_pool(plan->problem().device).acquire(plan->workspace_bytes(), stream);
  plan->run(q, k, v, o, lse, mask, lease.get(), lease.bytes(), stream, options.variant.get(), scales);
}

}  // namespace attnjit

// single_decode_with_kv_cache: plan (validate, choose kernels and split, make
// them ready on the device) and run (check tensors, fill params, launch).
#include "attnjit/single_decode.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "decode_params.h"
#include "engine.hpp"
#include "launcher.hpp"
#include "merge_params.h"
#include "ops/tensor_checks.hpp"
#include "planner/single_decode_planner.hpp"

namespace attnjit {

struct SingleDecodePlan::Impl {
  SingleDecodeProblem problem;
  planner::SingleDecodeLayout layout;
  std::shared_ptr<detail::Kernel> decode, merge;
};

SingleDecodePlan::SingleDecodePlan(const Runtime& rt, const SingleDecodeProblem& problem)
    : impl_(std::make_unique<Impl>()) {
  planner::validate(problem);
  auto& engine = rt.engine();
  impl_->problem = problem;
  planner::DeviceFigures figures;
  figures.sm_count = engine.sm_count(problem.device);
  impl_->layout = planner::plan_single_decode(problem, figures);
  impl_->decode = engine.load_on_device(impl_->layout.decode, problem.device);
  if (impl_->layout.merge) impl_->merge = engine.load_on_device(*impl_->layout.merge, problem.device);
}

SingleDecodePlan::~SingleDecodePlan() = default;
SingleDecodePlan::SingleDecodePlan(SingleDecodePlan&&) noexcept = default;
SingleDecodePlan& SingleDecodePlan::operator=(SingleDecodePlan&&) noexcept = default;

const SingleDecodeProblem& SingleDecodePlan::problem() const { return impl_->problem; }
size_t SingleDecodePlan::workspace_bytes() const { return impl_->layout.workspace_bytes; }
int SingleDecodePlan::num_splits() const { return impl_->layout.num_splits; }

std::string SingleDecodePlan::describe() const {
  const auto& L = impl_->layout;
  std::string s = fmt::format("{} grid=({},{},{}) threads={} smem={} splits={} chunk={} kv_begin={}", L.decode.name(),
                              L.decode_shape.grid[0], L.decode_shape.grid[1], L.decode_shape.grid[2],
                              L.decode_shape.threads, L.decode_shape.smem_bytes, L.num_splits, L.chunk_size, L.kv_begin);
  if (L.merge)
    s += fmt::format("; {} grid={} workspace={} B", L.merge->name(), L.merge_shape.grid[0], L.workspace_bytes);
  return s;
}

void SingleDecodePlan::run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                           const TensorView* lse, void* workspace, size_t workspace_bytes, Stream stream) const {
  const auto& P = impl_->problem;
  const auto& L = impl_->layout;
  const int64_t H = P.num_qo_heads, Hk = P.num_kv_heads, D = P.head_dim, N = P.kv_len;
  const int qa = 16, kva = 8 * static_cast<int>(dtype_size(P.kv_dtype));
  ops::check_tensor(q, "q", P.q_dtype, P.device, {H, D}, qa);
  const bool nhd = P.options.kv_layout == KVLayout::NHD;
  ops::check_tensor(k, "k", P.kv_dtype, P.device, nhd ? std::initializer_list<int64_t>{N, Hk, D} : std::initializer_list<int64_t>{Hk, N, D}, kva);
  ops::check_tensor(v, "v", P.kv_dtype, P.device, nhd ? std::initializer_list<int64_t>{N, Hk, D} : std::initializer_list<int64_t>{Hk, N, D}, kva);
  ops::check_tensor(o, "o", P.q_dtype, P.device, {H, D}, qa);
  if (lse) ops::check_tensor(*lse, "lse", DType::F32, P.device, {H}, 4);
  if (L.workspace_bytes > 0) {
    if (!workspace)
      throw Error(Status::WorkspaceTooSmall,
                  fmt::format("workspace is null; this plan ({} KV splits) needs {} bytes", L.num_splits, L.workspace_bytes));
    if (workspace_bytes < L.workspace_bytes)
      throw Error(Status::WorkspaceTooSmall, fmt::format("workspace_bytes={} is too small; this plan needs {} bytes",
                                                         workspace_bytes, L.workspace_bytes));
    if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
      throw Error(Status::InvalidArgument, "workspace must be 256-byte aligned");
  }

  kernels::DecodeParams dp{};
  dp.q = q.data;
  dp.o = o.data;
  dp.lse = lse ? static_cast<float*>(lse->data) : nullptr;
  char* ws = static_cast<char*>(workspace);
  dp.partial_o = L.num_splits > 1 ? reinterpret_cast<float*>(ws + L.partial_o_offset) : nullptr;
  dp.partial_lse = L.num_splits > 1 ? reinterpret_cast<float*>(ws + L.partial_lse_offset) : nullptr;
  dp.q_stride_h = q.strides[0];
  dp.o_stride_h = o.strides[0];
  dp.kv.k = k.data;
  dp.kv.v = v.data;
  dp.kv.k_stride_row = nhd ? k.strides[0] : k.strides[1];
  dp.kv.k_stride_head = nhd ? k.strides[1] : k.strides[0];
  dp.kv.v_stride_row = nhd ? v.strides[0] : v.strides[1];
  dp.kv.v_stride_head = nhd ? v.strides[1] : v.strides[0];
  dp.kv.kv_len = static_cast<int32_t>(N);
  dp.var.sm_scale = L.sm_scale;
  dp.var.v_scale = L.v_scale;
  dp.var.soft_cap = L.soft_cap;
  dp.var.rope_rcp_scale = L.rope_rcp_scale;
  dp.var.rope_log2_theta = L.rope_log2_theta;
  dp.var.window_left = P.options.window_left;  // decode variants do not check it: kv_begin applies the window
  dp.kv_len = static_cast<int32_t>(N);
  dp.kv_begin = L.kv_begin;
  dp.chunk_size = L.chunk_size;
  dp.num_splits = L.num_splits;
  dp.num_qo_heads = static_cast<int32_t>(H);
  dp.group_size = static_cast<int32_t>(H / Hk);

  cuda::ScopedDevice scope(P.device);
  detail::launch(*impl_->decode, L.decode_shape, &dp, stream);
  if (L.num_splits > 1) {
    kernels::MergeParams mp{};
    mp.partial_o = dp.partial_o;
    mp.partial_lse = dp.partial_lse;
    mp.o = o.data;
    mp.lse = dp.lse;
    mp.o_stride_row = o.strides[0];
    mp.num_rows = static_cast<int32_t>(H);
    mp.num_splits = L.num_splits;
    detail::launch(*impl_->merge, L.merge_shape, &mp, stream);
  }
}

namespace {

std::string memo_key(const SingleDecodeProblem& p) {
  const auto& o = p.options;
  auto f = [](const std::optional<float>& x) { return x ? fmt::format("{}", *x) : std::string("-"); };
  return fmt::format("single_decode|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", p.num_qo_heads,
                     p.num_kv_heads, p.head_dim, p.kv_len, int(p.q_dtype), int(p.kv_dtype), p.device,
                     int(o.kv_layout), int(o.pos_encoding_mode), o.use_tensor_cores, f(o.q_scale), f(o.k_scale),
                     f(o.v_scale), o.window_left, f(o.logits_soft_cap), f(o.sm_scale), f(o.rope_scale),
                     f(o.rope_theta), o.return_lse);
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw Error(Status::InvalidArgument, msg);
}

}  // namespace

void single_decode_with_kv_cache(const Runtime& rt, const TensorView& q, const TensorView& k, const TensorView& v,
                                 const TensorView& o, const TensorView* lse, const SingleDecodeOptions& options,
                                 Stream stream, void* workspace, size_t workspace_bytes) {
  require(q.ndim == 2, fmt::format("q: must be 2-D [num_qo_heads, head_dim] (got {})", q.describe()));
  require(k.ndim == 3, fmt::format("k: must be 3-D ({}) (got {})",
                                   options.kv_layout == KVLayout::NHD ? "[kv_len, num_kv_heads, head_dim]"
                                                                      : "[num_kv_heads, kv_len, head_dim]",
                                   k.describe()));
  SingleDecodeProblem p;
  p.num_qo_heads = static_cast<int>(q.shape[0]);
  p.head_dim = static_cast<int>(q.shape[1]);
  const bool nhd = options.kv_layout == KVLayout::NHD;
  p.kv_len = nhd ? k.shape[0] : k.shape[1];
  p.num_kv_heads = static_cast<int>(nhd ? k.shape[1] : k.shape[0]);
  require(k.shape[2] == q.shape[1], fmt::format("k: head_dim {} differs from q's {}", k.shape[2], q.shape[1]));
  p.q_dtype = q.dtype;
  p.kv_dtype = k.dtype;
  p.device = q.device;
  p.options = options;
  p.options.return_lse = lse != nullptr;

  auto& engine = rt.engine();
  const std::string key = memo_key(p);
  auto plan = std::static_pointer_cast<const SingleDecodePlan>(engine.find_plan(key));
  if (!plan) {
    plan = std::make_shared<const SingleDecodePlan>(rt, p);
    engine.remember_plan(key, plan);
  }
  if (!workspace && plan->workspace_bytes() > 0) {
    workspace = engine.workspace(p.device, plan->workspace_bytes());
    workspace_bytes = plan->workspace_bytes();
  }
  plan->run(q, k, v, o, lse, workspace, workspace_bytes, stream);
}

}  // namespace attnjit

// append_paged_kv_cache and get_batch_indices_positions: build the problem
// from the call's arguments (validated there), plan, fill the params and
// launch on the caller's stream. No allocation, no sync.
#include "attnjit/page.hpp"

#include <memory>
#include <string>

#include "cuda/driver.hpp"
#include "engine.hpp"
#include "launcher.hpp"
#include "ops/page/page_planner.hpp"
#include "ops/page/page_problem.hpp"
#include "page_params.h"

namespace attnjit {

namespace {

ops::DeviceFigures figures_of(const Runtime& rt, int device) {
  ops::DeviceFigures f;
  f.sm_count = rt.engine().sm_count(device);  // the grid cap; the kernels use no shared memory
  return f;
}

// The loaded kernel, memoized in the engine under a short key: the engine's
// own registry is keyed by the spec's canonical JSON, which takes about 2 us
// to build, and an engine calls these helpers every step for every layer.
std::shared_ptr<const detail::Kernel> kernel_for(const Runtime& rt, const KernelSpec& spec, int device) {
  auto& engine = rt.engine();
  const std::string key = "page/" + spec.name() + "/" + std::to_string(device);
  if (auto k = engine.find_plan(key)) return std::static_pointer_cast<const detail::Kernel>(k);
  std::shared_ptr<const detail::Kernel> k = engine.load_on_device(spec, device);
  engine.remember_plan(key, k);
  return k;
}

// One side's strides, the cache layout resolved: a chunk step is vec_bytes
// of contiguous elements, or one element of a strided last dimension.
kernels::PageAppendSide side(const TensorView& src, const TensorView& cache, KVLayout layout, int64_t chunk_elems) {
  const bool nhd = layout == KVLayout::NHD;
  kernels::PageAppendSide s{};
  s.src = src.data;
  s.cache = cache.data;
  s.src_token = src.strides[0];
  s.src_head = src.strides[1];
  s.src_chunk = chunk_elems * src.strides[2];
  s.cache_page = cache.strides[0];
  s.cache_slot = cache.strides[nhd ? 1 : 2];
  s.cache_head = cache.strides[nhd ? 2 : 1];
  s.cache_chunk = chunk_elems * cache.strides[3];
  return s;
}

}  // namespace

void append_paged_kv_cache(const Runtime& rt, const TensorView& append_key, const TensorView& append_value,
                           const PagedKVAppendTable& table, const TensorView& k_cache, const TensorView& v_cache,
                           KVLayout kv_layout, Stream stream) {
  const ops::PageAppendProblem problem =
      ops::page_append_problem_from_tensors(append_key, append_value, table, k_cache, v_cache, kv_layout);
  const ops::PageLaunch plan = ops::plan_page_append(problem, figures_of(rt, problem.device));
  // A bad table entry an earlier one-call entry point met on this device (table_check.hpp).
  detail::TableCheck& check = rt.engine().table_check(problem.device);
  check.raise_if_found("a call before this one");
  if (plan.items == 0) return;  // nothing appended

  const int64_t chunk_elems = plan.vec_bytes / static_cast<int64_t>(dtype_size(problem.kv_dtype));
  kernels::PageAppendParams p{};
  p.k = side(append_key, k_cache, kv_layout, chunk_elems);
  p.v = side(append_value, v_cache, kv_layout, chunk_elems);
  p.batch_indices = table.batch_indices;
  p.positions = table.positions;
  p.kv_indices = table.kv_indices;
  p.kv_indptr = table.kv_indptr;
  p.kv_last_page_len = table.kv_last_page_len;
  p.num_indices = table.num_indices;
  p.num_pages = problem.num_pages;
  p.batch_size = table.batch_size;
  p.rows = static_cast<uint32_t>(plan.items);
  p.heads = FastDivmod(static_cast<uint32_t>(problem.num_kv_heads));
  p.page_size = FastDivmod(static_cast<uint32_t>(problem.page_size));
  p.chunks = plan.chunks;
  p.vec_bytes = plan.vec_bytes;
  p.lanes_log2 = plan.lanes_log2;
  p.check = check.record();  // a skipped row's reason (kernels/paged_kv_append.cuh)

  const auto kernel = kernel_for(rt, plan.kernel.spec, problem.device);
  cuda::ScopedDevice scope(problem.device);
  detail::launch(*kernel, plan.kernel.shape, &p, stream);
  check.after_run(rt.engine().config().check_every_run, reinterpret_cast<CUstream>(stream));
}

void get_batch_indices_positions(const Runtime& rt, const int32_t* append_indptr, const int32_t* seq_lens,
                                 int batch_size, int64_t nnz, int32_t* batch_indices, int32_t* positions, int device,
                                 Stream stream) {
  const ops::BatchPositionsProblem problem = ops::batch_positions_problem_from_args(
      append_indptr, seq_lens, batch_size, nnz, batch_indices, positions, device);
  const ops::PageLaunch plan = ops::plan_batch_positions(problem, figures_of(rt, device));
  if (plan.items == 0) return;
  kernels::BatchPositionsParams p{};
  p.append_indptr = append_indptr;
  p.seq_lens = seq_lens;
  p.batch_indices = batch_indices;
  p.positions = positions;
  p.batch_size = batch_size;
  p.nnz = static_cast<int32_t>(nnz);
  const auto kernel = kernel_for(rt, plan.kernel.spec, device);
  cuda::ScopedDevice scope(device);
  detail::launch(*kernel, plan.kernel.shape, &p, stream);
}

}  // namespace attnjit

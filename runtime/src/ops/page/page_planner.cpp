#include "ops/page/page_planner.hpp"

#include <algorithm>

namespace attnjit::ops {

namespace {

// Resident threads per SM on every arch from sm_80 (2048 on sm_80/90, 1536
// on sm_86/89: the grid cap only bounds a grid-stride loop, so the larger
// figure costs nothing where fewer fit).
constexpr int kThreadsPerSm = 2048;

uint32_t capped_grid(int64_t ctas, int threads, const DeviceFigures& device) {
  const int64_t cap = int64_t(std::max(device.sm_count, 1)) * (kThreadsPerSm / threads);
  return static_cast<uint32_t>(std::clamp<int64_t>(ctas, 1, cap));
}

}  // namespace

PageKernel page_append_spec(DType kv_dtype) {
  PageKernel s;
  s.function = PageKernel::Function::AppendKV;
  s.elem_bytes = static_cast<int>(dtype_size(kv_dtype));
  return s;
}

PageKernel batch_positions_spec() {
  PageKernel s;
  s.function = PageKernel::Function::BatchPositions;
  s.elem_bytes = 4;
  return s;
}

PageLaunch plan_page_append(const PageAppendProblem& p, const DeviceFigures& device) {
  validate(p);
  const int es = static_cast<int>(dtype_size(p.kv_dtype));
  PageLaunch L;
  const PageKernel spec = page_append_spec(p.kv_dtype);
  L.kernel.role = "append_kv";
  L.kernel.spec = spec;
  L.items = p.nnz * p.num_kv_heads;
  // A strided last dimension moves element by element; otherwise the widest
  // access the addresses, strides and the row length allow.
  const int64_t row_bytes = int64_t(p.head_dim) * es;
  const int row_align = static_cast<int>(std::min<int64_t>(16, row_bytes & -row_bytes));
  L.vec_bytes = p.contiguous_rows ? std::min(p.access_bytes, row_align) : es;
  L.chunks = static_cast<int>(row_bytes / L.vec_bytes);
  while ((1 << L.lanes_log2) < L.chunks && (2 << L.lanes_log2) <= spec.threads()) ++L.lanes_log2;
  const int rows_per_cta = spec.threads() >> L.lanes_log2;
  L.kernel.shape.threads = static_cast<uint32_t>(spec.threads());
  L.kernel.shape.grid[0] = capped_grid((L.items + rows_per_cta - 1) / rows_per_cta, spec.threads(), device);
  return L;
}

PageLaunch plan_batch_positions(const BatchPositionsProblem& p, const DeviceFigures& device) {
  validate(p);
  PageLaunch L;
  const PageKernel spec = batch_positions_spec();
  L.kernel.role = "batch_positions";
  L.kernel.spec = spec;
  L.items = p.nnz;
  L.kernel.shape.threads = static_cast<uint32_t>(spec.threads());
  L.kernel.shape.grid[0] = capped_grid((p.nnz + spec.threads() - 1) / spec.threads(), spec.threads(), device);
  return L;
}

std::vector<KernelSpec> page_kernels(const PageProblem& p) {
  if (const auto* a = std::get_if<PageAppendProblem>(&p)) {
    validate(*a);
    return {page_append_spec(a->kv_dtype)};
  }
  validate(std::get<BatchPositionsProblem>(p));
  return {batch_positions_spec()};
}

nlohmann::json PageLaunch::to_json() const {
  nlohmann::json j = {{"kernels", nlohmann::json::array({launch_json(kernel)})}, {"items", items}};
  if (kernel.role == "append_kv") {
    j["vec_bytes"] = vec_bytes;
    j["chunks"] = chunks;
    j["threads_per_row"] = 1 << lanes_log2;
  }
  return j;
}

}  // namespace attnjit::ops

// The page helpers' benchmark: append_paged_kv_cache's K and V bytes read
// and written per second, for a decode step (one row per request) and a
// prefill (thousands of rows), each request's rows on shuffled pages; and
// get_batch_indices_positions' outputs.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>

#include "attnjit/page.hpp"
#include "bench/bench_support.hpp"
#include "ops/operator_entries.hpp"
#include "ops/page/page_problem.hpp"

namespace attnjit::ops {

namespace {

std::unique_ptr<bench::DeviceMem> upload(const std::vector<int32_t>& v) {
  auto m = std::make_unique<bench::DeviceMem>(std::max<size_t>(4, v.size() * 4));
  if (!v.empty()) ATTNJIT_CU(cuda::driver().MemcpyHtoD(m->p, v.data(), v.size() * 4));
  return m;
}

// Request b's rows: nnz / batch, the first nnz % batch one more.
std::vector<int32_t> rows_per_request(int64_t nnz, int batch) {
  std::vector<int32_t> rows(batch, static_cast<int32_t>(nnz / batch));
  for (int b = 0; b < nnz % batch; ++b) ++rows[b];
  return rows;
}

BenchFigures bench_append(const Runtime& rt, const PageAppendProblem& p, CUstream stream) {
  const int batch = std::max(p.batch_size, 1);
  const auto rows = rows_per_request(p.nnz, batch);
  // Each request's rows start a sequence of its own, on pages drawn at random.
  std::vector<int32_t> indptr{0}, last, batch_indices, positions;
  for (int b = 0; b < batch; ++b) {
    const int pages = std::max(1, (rows[b] + p.page_size - 1) / p.page_size);
    indptr.push_back(indptr.back() + pages);
    last.push_back(rows[b] - (pages - 1) * p.page_size);
    for (int r = 0; r < rows[b]; ++r) {
      batch_indices.push_back(b);
      positions.push_back(r);
    }
  }
  const int64_t pages = std::max<int64_t>(p.num_pages, indptr.back());
  std::vector<int32_t> ids(pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  ids.resize(indptr.back());

  const int64_t h = p.num_kv_heads, d = p.head_dim;
  const size_t es = dtype_size(p.kv_dtype);
  const size_t row_bytes = size_t(p.nnz) * h * d * es;
  const size_t page_elems = size_t(p.page_size) * h * d;
  bench::DeviceMem k(row_bytes), v(row_bytes), kc(pages * page_elems * es), vc(pages * page_elems * es);
  bench::fill_random(k.p, row_bytes, 1);
  bench::fill_random(v.p, row_bytes, 2);
  const auto d_bi = upload(batch_indices), d_pos = upload(positions), d_ids = upload(ids), d_indptr = upload(indptr),
             d_last = upload(last);
  const bool nhd = p.kv_layout == KVLayout::NHD;
  const std::vector<int64_t> cache_shape = nhd ? std::vector<int64_t>{pages, p.page_size, h, d}
                                               : std::vector<int64_t>{pages, h, p.page_size, d};
  const TensorView tk = make_tensor(k.get(), p.kv_dtype, {p.nnz, h, d}, p.device);
  const TensorView tv = make_tensor(v.get(), p.kv_dtype, {p.nnz, h, d}, p.device);
  const TensorView tkc = make_tensor(kc.get(), p.kv_dtype, cache_shape, p.device);
  const TensorView tvc = make_tensor(vc.get(), p.kv_dtype, cache_shape, p.device);
  PagedKVAppendTable table;
  table.batch_indices = static_cast<const int32_t*>(d_bi->get());
  table.positions = static_cast<const int32_t*>(d_pos->get());
  table.kv_indices = static_cast<const int32_t*>(d_ids->get());
  table.num_indices = static_cast<int64_t>(ids.size());
  table.kv_indptr = static_cast<const int32_t*>(d_indptr->get());
  table.kv_last_page_len = static_cast<const int32_t*>(d_last->get());
  table.batch_size = batch;
  const int launches = 20;
  auto launch_batch = [&] {
    for (int i = 0; i < launches; ++i)
      append_paged_kv_cache(rt, tk, tv, table, tkc, tvc, p.kv_layout, stream);
  };
  BenchFigures f;
  f.microseconds = bench::median_us(launch_batch, launches, 30, stream);
  f.bytes = 2.0 * 2.0 * double(row_bytes);  // K and V, each read and written once
  f.plan = {{"pages", pages}};
  return f;
}

BenchFigures bench_positions(const Runtime& rt, const BatchPositionsProblem& p, CUstream stream) {
  const int batch = std::max(p.batch_size, 1);
  const auto rows = rows_per_request(p.nnz, batch);
  std::vector<int32_t> indptr{0}, seq_lens;
  for (int b = 0; b < batch; ++b) {
    indptr.push_back(indptr.back() + rows[b]);
    seq_lens.push_back(rows[b] + 1000);  // an append after 1000 cached rows
  }
  const auto d_indptr = upload(indptr), d_lens = upload(seq_lens);
  bench::DeviceMem bi(size_t(p.nnz) * 4), pos(size_t(p.nnz) * 4);
  const int launches = 20;
  auto launch_batch = [&] {
    for (int i = 0; i < launches; ++i)
      get_batch_indices_positions(rt, static_cast<const int32_t*>(d_indptr->get()),
                                  static_cast<const int32_t*>(d_lens->get()), batch, p.nnz,
                                  static_cast<int32_t*>(bi.get()), static_cast<int32_t*>(pos.get()), p.device,
                                  stream);
  };
  BenchFigures f;
  f.microseconds = bench::median_us(launch_batch, launches, 30, stream);
  f.bytes = 8.0 * double(p.nnz);  // the two int32 outputs
  return f;
}

}  // namespace

std::vector<nlohmann::json> page_bench_problems() {
  std::vector<nlohmann::json> out;
  auto append = [&](int64_t nnz, int batch, const char* dtype, const char* layout) {
    out.push_back({{"op", "page"}, {"function", "append_paged_kv_cache"}, {"nnz", nnz}, {"batch_size", batch},
                   {"num_kv_heads", 8}, {"head_dim", 128}, {"page_size", 16}, {"kv_dtype", dtype},
                   {"kv_layout", layout}});
  };
  append(256, 256, "bfloat16", "NHD");  // a decode step
  append(256, 256, "bfloat16", "HND");
  append(32768, 8, "bfloat16", "NHD");  // a prefill
  append(32768, 8, "bfloat16", "HND");
  append(32768, 8, "float8_e4m3fn", "NHD");
  out.push_back({{"op", "page"}, {"function", "get_batch_indices_positions"}, {"batch_size", 256}, {"nnz", 256}});
  out.push_back({{"op", "page"}, {"function", "get_batch_indices_positions"}, {"batch_size", 8}, {"nnz", 32768}});
  return out;
}

BenchFigures page_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream_ptr) {
  PageProblem p = page_problem_from_json(problem);
  const auto stream = static_cast<CUstream>(stream_ptr);
  if (auto* a = std::get_if<PageAppendProblem>(&p)) {
    a->device = device;
    return bench_append(rt, *a, stream);
  }
  auto& q = std::get<BatchPositionsProblem>(p);
  q.device = device;
  return bench_positions(rt, q, stream);
}

}  // namespace attnjit::ops

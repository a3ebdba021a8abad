// Batch decode's benchmark: achieved K+V bytes/s over a paged cache whose
// pages are shuffled in memory (as a serving engine's are), rotated across
// copies totalling well over the L2, through plan/run; plus the host cost of
// plan() for the problem's batch.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "attnjit/batch_decode.hpp"
#include "attnjit/error.hpp"
#include "bench/bench_support.hpp"
#include "ops/operator_entries.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"

namespace attnjit::ops {

std::vector<nlohmann::json> batch_decode_bench_problems() {
  std::vector<nlohmann::json> out;
  auto problem = [](int batch, int64_t len, int hq, int hkv, bool tc, const char* kv) {
    return nlohmann::json{{"op", "batch_decode"}, {"batch_size", batch}, {"kv_len", len},  {"page_size", 16},
                          {"num_qo_heads", hq},   {"num_kv_heads", hkv}, {"head_dim", 128}, {"q_dtype", "bfloat16"},
                          {"kv_dtype", kv},       {"use_tensor_cores", tc}};
  };
  for (bool tc : {false, true}) {
    out.push_back(problem(64, 4096, 32, 8, tc, "bfloat16"));
    out.push_back(problem(256, 1024, 32, 8, tc, "bfloat16"));
    out.push_back(problem(1, 32768, 32, 8, tc, "bfloat16"));
    auto skewed = problem(64, 512, 32, 8, tc, "bfloat16");
    std::vector<int> lens(64, 512);
    lens[0] = 32768;
    skewed.erase("kv_len");
    skewed["kv_lens"] = lens;
    out.push_back(skewed);
  }
  out.push_back(problem(64, 4096, 32, 32, false, "bfloat16"));
  out.push_back(problem(64, 4096, 32, 8, true, "float8_e4m3fn"));
  auto bt = problem(64, 4096, 32, 8, true, "bfloat16");
  bt["page_table"] = "block_table";
  bt["host_lengths"] = false;
  bt["max_seq_len"] = 4096;
  bt["kv_layout"] = "HND";
  out.push_back(bt);
  return out;
}

BenchFigures batch_decode_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream_ptr) {
  BatchDecodeProblem p = batch_decode_problem_from_json(problem);
  p.device = device;
  const auto stream = static_cast<CUstream>(stream_ptr);
  if (p.max_q_len > 0)  // the bench builds no cum_seq_lens_q
    throw Error(Status::InvalidArgument,
                fmt::format("problem.max_q_len={} is not benchmarked (per-request query lengths); allowed: 0, with "
                            "q_len_per_req tokens for every request",
                            p.max_q_len));
  const std::vector<int32_t> lens = kv_lens_from_json(problem, p);
  const int B = p.batch_size, ps = p.page_size;
  const int64_t hq = p.num_qo_heads, hkv = p.num_kv_heads, d = p.head_dim;

  // Page tables: every request's pages, then a random permutation of page ids.
  std::vector<int32_t> indptr{0}, last, seq_lens(lens.begin(), lens.end());
  int64_t rows = 0;
  for (int32_t n : lens) {
    indptr.push_back(indptr.back() + (n + ps - 1) / ps);
    last.push_back(n - (n - 1) / ps * ps);
    rows += n;
  }
  const int num_pages = indptr.back();
  std::vector<int32_t> ids(num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(17));
  int max_pages = 0;
  for (int b = 0; b < B; ++b) max_pages = std::max(max_pages, indptr[b + 1] - indptr[b]);
  std::vector<int32_t> table(size_t(B) * max_pages, 0);
  for (int b = 0; b < B; ++b)
    for (int i = indptr[b]; i < indptr[b + 1]; ++i) table[size_t(b) * max_pages + (i - indptr[b])] = ids[i];
  auto upload = [](const std::vector<int32_t>& v) {
    auto m = std::make_unique<bench::DeviceMem>(std::max<size_t>(4, v.size() * 4));
    ATTNJIT_CU(cuda::driver().MemcpyHtoD(m->p, v.data(), v.size() * 4));
    return m;
  };
  const auto d_indptr = upload(indptr), d_ids = upload(ids), d_last = upload(last), d_table = upload(table),
             d_lens = upload(seq_lens);

  const size_t cache_bytes = size_t(num_pages) * ps * hkv * d * dtype_size(p.kv_dtype);
  const int sets = bench::rotation_sets(2 * cache_bytes);
  const bool nhd = p.options.kv_layout == KVLayout::NHD;
  std::vector<std::unique_ptr<bench::DeviceMem>> mem;
  std::vector<PagedKVView> views;
  for (int i = 0; i < sets; ++i) {
    PagedKVView kv;
    for (int half = 0; half < 2; ++half) {
      mem.push_back(std::make_unique<bench::DeviceMem>(cache_bytes));
      bench::fill_random(mem.back()->p, cache_bytes, 10 + 2 * i + half);
      (half ? kv.v_cache : kv.k_cache) =
          make_tensor(mem.back()->get(), p.kv_dtype,
                      nhd ? std::initializer_list<int64_t>{num_pages, ps, hkv, d}
                          : std::initializer_list<int64_t>{num_pages, hkv, ps, d},
                      device);
    }
    kv.indptr = static_cast<const int32_t*>(d_indptr->get());
    kv.indices = static_cast<const int32_t*>(d_ids->get());
    kv.last_page_len = static_cast<const int32_t*>(d_last->get());
    kv.k_block_table = kv.v_block_table = static_cast<const int32_t*>(d_table->get());
    kv.block_table_stride = max_pages;
    kv.seq_lens = static_cast<const int32_t*>(d_lens->get());
    kv.table_entries = p.page_table == PageTable::IndptrIndices ? num_pages : max_pages;
    views.push_back(kv);
  }

  BatchDecodePlan plan(rt, p);
  bench::DeviceMem ws(std::max<size_t>(plan.workspace_bytes(), 256));
  // Host cost of plan(): partition + upload, median of many.
  double plan_us = 0;
  if (p.host_lengths) {
    std::vector<double> t;
    for (int i = 0; i < 50; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      plan.plan(lens.data(), B, stream);
      t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    plan_us = bench::median(t);
  }
  const int64_t tokens = int64_t(B) * p.q_len_per_req;  // query rows: q_len_per_req per request (speculative)
  const size_t q_bytes = size_t(tokens) * hq * d * dtype_size(p.q_dtype);
  bench::DeviceMem q(q_bytes), o(size_t(tokens) * hq * d * dtype_size(p.o_dtype));
  bench::fill_random(q.p, q_bytes, 7);
  const TensorView tq = make_tensor(q.get(), p.q_dtype, {tokens, hq, d}, device);
  const TensorView to = make_tensor(o.get(), p.o_dtype, {tokens, hq, d}, device);
  const int batch = sets * std::max(1, 8 / sets);
  int next = 0;
  auto launch_batch = [&] {
    for (int i = 0; i < batch; ++i, next = (next + 1) % sets)
      plan.run(tq, views[next], to, nullptr, ws.get(), plan.workspace_bytes(), stream);
  };
  BenchFigures f;
  f.microseconds = bench::median_us(launch_batch, batch, 30, stream);
  f.bytes = 2.0 * double(rows) * hkv * d * dtype_size(p.kv_dtype);  // the K and V rows attended (not page padding)
  f.plan = {{"describe", plan.describe()}, {"work_items", plan.num_work_items()}, {"chunk", plan.chunk_size()},
            {"plan_host_us", plan_us}};
  return f;
}

}  // namespace attnjit::ops

// Batch prefill's benchmark: useful TFLOP/s (4 * heads * visible (query,
// key) pairs * head_dim; causal aligns each request's queries to the end of
// its KV, as run() does) through the public wrappers, K/V rotated across
// copies totalling well over the L2, a paged cache's pages shuffled in memory
// (as a serving engine's are); plus the host cost of plan() for the batch.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>

#include "attnjit/batch_prefill.hpp"
#include "attnjit/error.hpp"
#include "bench/bench_support.hpp"
#include "engine.hpp"
#include "ops/operator_entries.hpp"
#include "ops/batch_prefill/batch_prefill_problem.hpp"

namespace attnjit::ops {

namespace {

// Keys query i of a request (of qo, over kv keys) sees: all, or under causal
// those up to its position kv - qo + i; a window keeps the last window_left + 1.
double visible_pairs(const BatchPrefillProblem& p) {
  double pairs = 0;
  const int64_t w = p.options.window_left;
  for (size_t b = 0; b < p.kv_lens.size(); ++b) {
    const int64_t qo = p.qo_lens[b], kv = p.kv_lens[b];
    for (int64_t i = 0; i < qo; ++i) {
      const int64_t pos = kv - qo + i;
      const int64_t hi = p.options.causal ? std::min(kv, pos + 1) : kv;  // keys [lo, hi)
      const int64_t lo = w >= 0 ? std::max<int64_t>(0, pos - w) : 0;
      pairs += double(std::max<int64_t>(0, hi - lo));
    }
  }
  return pairs;
}

BatchPrefillPlanOptions plan_options(const BatchPrefillProblem& p) {
  BatchPrefillPlanOptions o;
  o.causal = p.options.causal;
  o.pos_encoding_mode = p.options.pos_encoding_mode;
  o.window_left = p.options.window_left;
  o.logits_soft_cap = p.options.logits_soft_cap;
  o.sm_scale = p.options.sm_scale;
  o.rope_scale = p.options.rope_scale;
  o.rope_theta = p.options.rope_theta;
  o.q_data_type = p.q_dtype;
  o.kv_data_type = p.kv_dtype;
  return o;
}

}  // namespace

std::vector<nlohmann::json> batch_prefill_bench_problems() {
  auto problem = [](const char* source, int batch, int qo, int kv, int hq, int hkv, int d, bool causal) {
    nlohmann::json j = {{"op", "batch_prefill"}, {"kv_source", source}, {"batch_size", batch}, {"qo_len", qo},
                        {"kv_len", kv},          {"num_qo_heads", hq},  {"num_kv_heads", hkv}, {"head_dim", d},
                        {"q_dtype", "bfloat16"}, {"causal", causal}};
    return j;
  };
  std::vector<nlohmann::json> out;
  // FlashAttention's grid point: 16k tokens as 16 requests of 1024, 2048 / d heads.
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) out.push_back(problem("ragged", 16, 1024, 1024, 2048 / d, 2048 / d, d, causal));
  // Serving: appends of 128 new tokens onto 8k cached (paged, 16-token pages), chunked prefill, and a mixed batch.
  out.push_back(problem("paged", 32, 128, 8192, 32, 8, 128, true));
  out.push_back(problem("paged", 8, 512, 4096, 32, 8, 128, true));
  {
    auto mixed = problem("paged", 1, 1, 1, 32, 8, 128, true);
    for (const char* k : {"batch_size", "qo_len", "kv_len"}) mixed.erase(k);
    std::vector<int> qo(32, 16), kv(32, 4096);
    qo[0] = 2048;
    kv[0] = 2048;  // one fresh prompt among 31 short appends
    mixed["qo_lens"] = qo;
    mixed["kv_lens"] = kv;
    out.push_back(mixed);
  }
  auto fp8 = problem("paged", 32, 128, 8192, 32, 8, 128, true);
  fp8["kv_dtype"] = "float8_e4m3fn";
  out.push_back(fp8);
  auto graph = problem("paged", 32, 128, 8192, 32, 8, 128, true);
  graph["use_cuda_graph"] = true;
  graph["max_batch_size"] = 32;
  out.push_back(graph);
  return out;
}

BenchFigures batch_prefill_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream_ptr) {
  BatchPrefillProblem p = batch_prefill_problem_from_json(problem);
  p.device = device;
  if (!p.has_lengths())
    throw Error(Status::InvalidArgument,
                "bench: a batch_prefill problem needs lengths (qo_lens and kv_lens, or "
                "qo_len, kv_len and batch_size)");
  if (p.options.custom_mask)
    throw Error(Status::InvalidArgument, "bench: custom_mask=true is not benchmarked; allowed: false");
  const auto stream = static_cast<CUstream>(stream_ptr);
  const bool paged = p.source == KVSource::Paged, nhd = p.options.kv_layout == KVLayout::NHD;
  const int ps = p.page_size;
  const int64_t hq = p.num_qo_heads, hkv = p.num_kv_heads, d = p.head_dim;
  const BatchPrefillShape shape = planner_shape(p);
  const int64_t nnz = shape.qo_indptr.back();

  // Index arrays: ragged, K/V rows per request; paged, its pages (a random
  // permutation of page ids) and last page's length.
  std::vector<int32_t> kv_indptr{0}, ids, last;
  int64_t kv_rows = 0;
  for (int32_t n : p.kv_lens) {
    kv_rows += n;
    const int32_t pages = paged ? (n + ps - 1) / ps : n;
    kv_indptr.push_back(kv_indptr.back() + pages);
    if (paged) last.push_back(pages > 0 ? n - (pages - 1) * ps : 0);
  }
  const int64_t extent = kv_indptr.back();  // ragged: rows; paged: pages
  if (paged) {
    ids.resize(size_t(extent));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(17));
  }

  // K/V copies rotated so one pass of launches reads well over the L2.
  const size_t kv_bytes = size_t(paged ? extent * ps : extent) * hkv * d * dtype_size(p.kv_dtype);
  const int sets = bench::rotation_sets(2 * kv_bytes);
  const int64_t n_kv = paged ? std::max<int64_t>(extent, 1) : extent;  // ragged: exactly the plan's rows
  const std::vector<int64_t> kv_shape =
      paged ? (nhd ? std::vector<int64_t>{n_kv, ps, hkv, d} : std::vector<int64_t>{n_kv, hkv, ps, d})
            : (nhd ? std::vector<int64_t>{n_kv, hkv, d} : std::vector<int64_t>{hkv, n_kv, d});
  std::vector<std::unique_ptr<bench::DeviceMem>> mem;
  std::vector<std::pair<TensorView, TensorView>> kv;
  for (int i = 0; i < sets; ++i) {
    TensorView half[2];
    for (int h = 0; h < 2; ++h) {
      mem.push_back(std::make_unique<bench::DeviceMem>(std::max<size_t>(kv_bytes, 256)));
      bench::fill_random(mem.back()->p, kv_bytes, 10 + 2 * i + h);
      half[h] = make_tensor(mem.back()->get(), p.kv_dtype, kv_shape, device);
    }
    kv.emplace_back(half[0], half[1]);
  }
  const size_t q_bytes = size_t(nnz) * hq * d * dtype_size(p.q_dtype);
  bench::DeviceMem q(std::max<size_t>(q_bytes, 256)), o(std::max<size_t>(q_bytes, 256)),
      lse(std::max<size_t>(size_t(nnz) * hq * 4, 256));
  bench::fill_random(q.p, q_bytes, 7);
  const TensorView tq = make_tensor(q.get(), p.q_dtype, {nnz, hq, d}, device);
  const TensorView to = make_tensor(o.get(), p.q_dtype, {nnz, hq, d}, device);
  const TensorView tl = make_tensor(lse.get(), DType::F32, {nnz, hq}, device);

  // The scratch a plan of these lengths needs on this device.
  DeviceFigures figures;
  figures.sm_count = rt.engine().sm_count(device);
  figures.arch = rt.engine().arch_of(device);
  const size_t ws_bytes = std::max<size_t>(plan_batch_prefill(shape, figures).workspace.float_bytes(), 256);
  bench::DeviceMem ws(ws_bytes);

  // CUDA-graph mode's fixed buffers, sized for max_batch_size requests and this cache.
  std::vector<std::unique_ptr<bench::DeviceMem>> graph_mem;
  BatchPrefillCudaGraphBuffers graph;
  if (p.use_cuda_graph) {
    auto buf = [&](size_t entries) {
      graph_mem.push_back(std::make_unique<bench::DeviceMem>(std::max<size_t>(entries, 1) * 4));
      return static_cast<int32_t*>(graph_mem.back()->get());
    };
    graph.max_batch_size = p.max_batch_size;
    graph.qo_indptr = buf(size_t(p.max_batch_size) + 1);
    graph.kv_indptr = buf(size_t(p.max_batch_size) + 1);
    if (paged) {
      graph.max_num_pages = std::max<int64_t>(extent, 1);
      graph.paged_kv_indices = buf(size_t(graph.max_num_pages));
      graph.paged_kv_last_page_len = buf(size_t(p.max_batch_size));
    }
  }
  const KVLayout layout = p.options.kv_layout;
  const std::string& backend = p.options.backend;
  std::unique_ptr<BatchPrefillWithRaggedKVCacheWrapper> rw;
  std::unique_ptr<BatchPrefillWithPagedKVCacheWrapper> pw;
  if (paged && p.use_cuda_graph)
    pw = std::make_unique<BatchPrefillWithPagedKVCacheWrapper>(rt, ws.get(), ws_bytes, graph, layout, backend, device);
  else if (paged)
    pw = std::make_unique<BatchPrefillWithPagedKVCacheWrapper>(rt, ws.get(), ws_bytes, layout, backend, device);
  else if (p.use_cuda_graph)
    rw = std::make_unique<BatchPrefillWithRaggedKVCacheWrapper>(rt, ws.get(), ws_bytes, graph, layout, backend, device);
  else
    rw = std::make_unique<BatchPrefillWithRaggedKVCacheWrapper>(rt, ws.get(), ws_bytes, layout, backend, device);

  const BatchPrefillPlanOptions options = plan_options(p);
  auto plan = [&] {
    if (pw)
      pw->plan(shape.qo_indptr, kv_indptr, ids, last, p.num_qo_heads, p.num_kv_heads, p.head_dim, ps, options, stream);
    else
      rw->plan(shape.qo_indptr, kv_indptr, p.num_qo_heads, p.num_kv_heads, p.head_dim, options, stream);
  };
  plan();  // compiles or loads the kernels
  // Host cost of plan(): work list + upload, median of many.
  std::vector<double> plan_times;
  for (int i = 0; i < 50; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    plan();
    plan_times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }

  const TensorView* out_lse = p.options.return_lse ? &tl : nullptr;
  const int batch = sets * std::max(1, 8 / sets);
  int next = 0;
  auto launch_batch = [&] {
    for (int i = 0; i < batch; ++i, next = (next + 1) % sets) {
      const auto& [k, v] = kv[size_t(next)];
      if (pw)
        pw->run(tq, k, v, to, out_lse, p.options.k_scale, p.options.v_scale, stream);
      else
        rw->run(tq, k, v, to, out_lse, p.options.k_scale, p.options.v_scale, stream);
    }
  };
  BenchFigures f;
  f.microseconds = bench::median_us(launch_batch, batch, 30, stream);
  f.flops = 4.0 * double(hq) * visible_pairs(p) * double(d);
  // q read, o written, and the K and V rows attended (not page padding).
  f.bytes = 2.0 * double(q_bytes) + 2.0 * double(kv_rows) * double(hkv * d * dtype_size(p.kv_dtype));
  f.plan = {{"describe", pw ? pw->describe() : rw->describe()}, {"plan_host_us", bench::median(plan_times)}};
  return f;
}

}  // namespace attnjit::ops

// Single decode's benchmark: achieved K+V bytes/s on random data rotated
// across buffers totalling well over the L2, through plan/run.
#include <fmt/format.h>

#include "attnjit/single_decode.hpp"
#include "bench/bench_support.hpp"
#include "ops/operator_entries.hpp"
#include "ops/single_decode/single_decode_problem.hpp"

namespace attnjit::ops {

std::vector<nlohmann::json> single_decode_bench_problems() {
  std::vector<nlohmann::json> out;
  for (auto [hq, hkv] : std::vector<std::pair<int, int>>{{32, 8}, {32, 32}, {64, 8}, {32, 4}})
    for (bool tc : {false, true})
      for (int64_t n : {4096, 32768, 131072})
        out.push_back({{"op", "single_decode"}, {"num_qo_heads", hq}, {"num_kv_heads", hkv}, {"head_dim", 128},
                       {"kv_len", n}, {"q_dtype", "bfloat16"}, {"use_tensor_cores", tc}});
  // fp8 KV beside bf16's rows above (issue 6: at least 1.8x faster at 32k and 128k).
  for (bool tc : {false, true})
    for (int64_t n : {32768, 131072})
      out.push_back({{"op", "single_decode"}, {"num_qo_heads", 32}, {"num_kv_heads", 8}, {"head_dim", 128},
                     {"kv_len", n}, {"q_dtype", "bfloat16"}, {"kv_dtype", "float8_e4m3fn"}, {"use_tensor_cores", tc}});
  return out;
}

BenchFigures single_decode_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream_ptr) {
  SingleDecodeProblem p = single_decode_problem_from_json(problem);
  p.device = device;
  const auto stream = static_cast<CUstream>(stream_ptr);
  SingleDecodePlan plan(rt, p);
  const int64_t hq = p.num_qo_heads, hkv = p.num_kv_heads, d = p.head_dim, n = p.kv_len;
  const size_t kv_bytes = size_t(n) * hkv * d * dtype_size(p.kv_dtype);
  const int sets = bench::rotation_sets(2 * kv_bytes);
  std::vector<std::unique_ptr<bench::DeviceMem>> ks, vs;
  std::vector<TensorView> tk, tv;
  const bool nhd = p.options.kv_layout == KVLayout::NHD;
  for (int i = 0; i < sets; ++i) {
    ks.push_back(std::make_unique<bench::DeviceMem>(kv_bytes));
    vs.push_back(std::make_unique<bench::DeviceMem>(kv_bytes));
    bench::fill_random(ks.back()->p, kv_bytes, 10 + i);
    bench::fill_random(vs.back()->p, kv_bytes, 100 + i);
    tk.push_back(make_tensor(ks.back()->get(), p.kv_dtype, nhd ? std::initializer_list<int64_t>{n, hkv, d}
                                                               : std::initializer_list<int64_t>{hkv, n, d}, device));
    tv.push_back(make_tensor(vs.back()->get(), p.kv_dtype, nhd ? std::initializer_list<int64_t>{n, hkv, d}
                                                               : std::initializer_list<int64_t>{hkv, n, d}, device));
  }
  const size_t q_bytes = size_t(hq) * d * dtype_size(p.q_dtype);
  bench::DeviceMem q(q_bytes), o(q_bytes), ws(plan.workspace_bytes()), lse(size_t(hq) * 4);
  bench::fill_random(q.p, q_bytes, 7);
  const TensorView tq = make_tensor(q.get(), p.q_dtype, {hq, d}, device);
  const TensorView to = make_tensor(o.get(), p.q_dtype, {hq, d}, device);
  const TensorView tl = make_tensor(lse.get(), DType::F32, {hq}, device);
  const int batch = sets * std::max(1, 8 / sets);
  int next = 0;
  auto launch_batch = [&] {
    for (int i = 0; i < batch; ++i, next = (next + 1) % sets)
      plan.run(tq, tk[next], tv[next], to, p.options.return_lse ? &tl : nullptr, ws.get(),
               plan.workspace_bytes(), stream);
  };
  BenchFigures f;
  f.microseconds = bench::median_us(launch_batch, batch, 30, stream);
  f.bytes = 2.0 * kv_bytes;
  f.plan = {{"describe", plan.describe()}, {"num_splits", plan.num_splits()}};
  return f;
}

}  // namespace attnjit::ops

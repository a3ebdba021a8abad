// Single prefill's benchmark: useful TFLOP/s (4 * heads * attended (query,
// key) pairs * head_dim) through plan/run, the FlashAttention benchmark's
// convention: causal counts only the pairs below the diagonal.
#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "attnjit/prefill.hpp"
#include "bench/bench_support.hpp"
#include "ops/operator_entries.hpp"
#include "ops/single_prefill/single_prefill_problem.hpp"

namespace attnjit::ops {

std::vector<nlohmann::json> single_prefill_bench_problems() {
  std::vector<nlohmann::json> out;
  // bf16, 2048 / head_dim heads; single requests of 1k, 4k, 16k; an append of 128 tokens onto 8k.
  for (int d : {64, 128, 256})
    for (bool causal : {false, true})
      for (int64_t n : {1024, 4096, 16384})
        out.push_back({{"op", "single_prefill"}, {"num_qo_heads", 2048 / d}, {"num_kv_heads", 2048 / d},
                       {"head_dim", d}, {"qo_len", n}, {"kv_len", n}, {"q_dtype", "bfloat16"}, {"causal", causal}});
  out.push_back({{"op", "single_prefill"}, {"num_qo_heads", 32}, {"num_kv_heads", 8}, {"head_dim", 128},
                 {"qo_len", 128}, {"kv_len", 8192}, {"q_dtype", "bfloat16"}, {"causal", true}});
  return out;
}

BenchFigures single_prefill_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream_ptr) {
  SinglePrefillProblem p = single_prefill_problem_from_json(problem);
  p.device = device;
  if (p.options.custom_mask) throw Error(Status::InvalidArgument, "bench: custom_mask problems are not benchmarked");
  const auto stream = static_cast<CUstream>(stream_ptr);
  SinglePrefillPlan plan(rt, p);
  const int64_t hq = p.num_qo_heads, hkv = p.num_kv_heads, d = p.head_dim, m = p.qo_len, n = p.kv_len;
  const size_t q_bytes = size_t(m) * hq * d * 2, kv_bytes = size_t(n) * hkv * d * dtype_size(p.kv_dtype);
  const bool nhd = p.options.kv_layout == KVLayout::NHD;
  bench::DeviceMem q(q_bytes), k(kv_bytes), v(kv_bytes), o(q_bytes), ws(plan.workspace_bytes()), lse(size_t(m) * hq * 4);
  bench::fill_random(q.p, q_bytes, 7);
  bench::fill_random(k.p, kv_bytes, 8);
  bench::fill_random(v.p, kv_bytes, 9);
  // A vector, not an initializer_list: one kept in a variable outlives its array.
  const std::vector<int64_t> kv_shape = nhd ? std::vector<int64_t>{n, hkv, d} : std::vector<int64_t>{hkv, n, d};
  const TensorView tq = make_tensor(q.get(), p.q_dtype, {m, hq, d}, device);
  const TensorView tk = make_tensor(k.get(), p.kv_dtype, kv_shape, device);
  const TensorView tv = make_tensor(v.get(), p.kv_dtype, kv_shape, device);
  const TensorView to = make_tensor(o.get(), p.q_dtype, {m, hq, d}, device);
  const TensorView tl = make_tensor(lse.get(), DType::F32, {m, hq}, device);
  const int batch = 4;
  auto launch_batch = [&] {
    for (int i = 0; i < batch; ++i)
      plan.run(tq, tk, tv, to, p.options.return_lse ? &tl : nullptr, nullptr, ws.get(), plan.workspace_bytes(), stream);
  };
  // Attended pairs: query i sees keys [0, n - m + i] under causal.
  double pairs = 0;
  if (p.options.causal)
    for (int64_t i = 0; i < m; ++i) pairs += double(std::min<int64_t>(n, n - m + i + 1));
  else
    pairs = double(m) * double(n);
  BenchFigures f;
  f.microseconds = bench::median_us(launch_batch, batch, 20, stream);
  f.flops = 4.0 * double(hq) * pairs * double(d);
  f.bytes = double(q_bytes) * 2 + 2.0 * double(kv_bytes);
  f.plan = {{"describe", plan.describe()}, {"num_kv_chunks", plan.num_kv_chunks()}};
  return f;
}

}  // namespace attnjit::ops

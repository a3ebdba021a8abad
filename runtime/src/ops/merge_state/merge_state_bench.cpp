// The state merges' benchmark: achieved bytes/s (every state's V and lse
// read, the merged V and lse written) through the public functions, inputs
// rotated across copies totalling well over the L2.
#include <fmt/format.h>

#include <memory>

#include "attnjit/error.hpp"
#include "attnjit/merge_state.hpp"
#include "bench/bench_support.hpp"
#include "ops/operator_entries.hpp"
#include "ops/merge_state/merge_state_problem.hpp"

namespace attnjit::ops {

std::vector<nlohmann::json> merge_state_bench_problems() {
  // num_states: merge_states' only (0: the field left out).
  auto problem = [](const char* function, int64_t seq, int heads, int d, int num_states = 0) {
    nlohmann::json j{{"op", "merge_state"}, {"function", function}, {"seq_len", seq},
                     {"num_heads", heads},  {"head_dim", d},        {"dtype", "bfloat16"}};
    if (num_states) j["num_states"] = num_states;
    return j;
  };
  std::vector<nlohmann::json> out;
  // Two prefill levels of 8k tokens x 32 heads (SGLang's ragged + paged), in place (vLLM's cascade), and many.
  for (int d : {64, 128, 256}) out.push_back(problem("merge_state", 8192, 32, d));
  out.push_back(problem("merge_state_in_place", 8192, 32, 128));
  out.push_back(problem("merge_states", 2048, 32, 128, 8));
  return out;
}

BenchFigures merge_state_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream_ptr) {
  MergeStateProblem p = merge_state_problem_from_json(problem);
  p.device = device;
  if (!p.has_sizes() || p.seq_len == 0)
    throw Error(Status::InvalidArgument,
                fmt::format("bench: a merge_state problem needs num_heads >= 1 and seq_len >= 1 (given {} and {})",
                            p.num_heads, p.seq_len));
  const auto stream = static_cast<CUstream>(stream_ptr);
  const int64_t seq = p.seq_len, h = p.num_heads, d = p.head_dim, n = p.num_states;
  const size_t es = dtype_size(p.dtype);
  const size_t v_bytes = size_t(seq * h * d) * es, s_bytes = size_t(seq * h) * 4;  // one state
  const int sets = bench::rotation_sets(size_t(n) * (v_bytes + s_bytes));

  // Per set: the n states (one buffer each for V and lse, states contiguous), and the merged output.
  struct Set {
    std::unique_ptr<bench::DeviceMem> v, s, vo, so;
  };
  std::vector<Set> mem;
  for (int i = 0; i < sets; ++i) {
    Set m{std::make_unique<bench::DeviceMem>(size_t(n) * v_bytes),
          std::make_unique<bench::DeviceMem>(size_t(n) * s_bytes), std::make_unique<bench::DeviceMem>(v_bytes),
          std::make_unique<bench::DeviceMem>(s_bytes)};
    bench::fill_random(m.v->p, size_t(n) * v_bytes, 20 + 2 * i);
    bench::fill_random(m.s->p, size_t(n) * s_bytes, 21 + 2 * i);  // 16-bit patterns: finite floats near +-1
    mem.push_back(std::move(m));
  }
  auto state = [&](const Set& m, int64_t k) {
    return std::pair{make_tensor(static_cast<char*>(m.v->get()) + k * v_bytes, p.dtype, {seq, h, d}, device),
                     make_tensor(static_cast<char*>(m.s->get()) + k * s_bytes, DType::F32, {seq, h}, device)};
  };
  const int batch = sets * std::max(1, 8 / sets);
  int next = 0;
  auto launch_batch = [&] {
    for (int i = 0; i < batch; ++i, next = (next + 1) % sets) {
      const Set& m = mem[size_t(next)];
      const TensorView vo = make_tensor(m.vo->get(), p.dtype, {seq, h, d}, device);
      const TensorView so = make_tensor(m.so->get(), DType::F32, {seq, h}, device);
      switch (p.function) {
        case MergeFunction::MergeState: {
          const auto [va, sa] = state(m, 0);
          const auto [vb, sb] = state(m, 1);
          merge_state(rt, va, sa, vb, sb, vo, &so, stream);
          break;
        }
        case MergeFunction::MergeStateInPlace: {
          // State 0 takes state 1 in: its values stay convex combinations, its lse grows by at most 1 a launch.
          const auto [va, sa] = state(m, 0);
          const auto [vb, sb] = state(m, 1);
          merge_state_in_place(rt, va, sa, vb, sb, nullptr, stream);
          break;
        }
        case MergeFunction::MergeStates: {
          const TensorView v = make_tensor(m.v->get(), p.dtype, {seq, n, h, d}, device);
          const TensorView s = make_tensor(m.s->get(), DType::F32, {seq, n, h}, device);
          merge_states(rt, v, s, vo, &so, stream);
          break;
        }
      }
    }
  };
  BenchFigures f;
  f.microseconds = bench::median_us(launch_batch, batch, 30, stream);
  f.bytes = double(n) * double(v_bytes + s_bytes) + double(v_bytes + s_bytes);  // n states read, one written
  f.plan = {{"kernel", merge_state_kernel(p.head_dim, p.dtype).name()}, {"rows", seq * h}, {"states", n}};
  return f;
}

}  // namespace attnjit::ops

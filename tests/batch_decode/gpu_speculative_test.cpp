// Speculative decoding in batch decode on the GPU: several query tokens per
// request, causal among themselves, against the double-precision reference
// (single decode's, per request and token, at the token's position
// kv_len - q_len + t, on the request's gathered rows). Through TensorRT-LLM's
// entry point (block tables, lengths on the device: uniform splits) with
// q_len_per_req 1-4 and per-request lengths (cum_seq_lens_q), and through a
// BatchDecodePlan with host lengths (work list, per-request merge); groups
// 1/4/5/8, head dims 64/128, bf16 and fp8 e4m3 KV, pages of 1 and 16, lengths
// off page boundaries, split KV, windows, sinks, a soft cap. Output is
// poisoned first, so a row left unwritten fails. lse by absolute error
// (base 2). Skips without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>

#include "attnjit/attnjit.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "support/decode_entry_args.hpp"
#include "support/paged_kv_device.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/sample_values.hpp"
#include "reference/token_reference.hpp"

namespace attnjit::test {
namespace {

struct SpecCase {
  std::vector<int32_t> kv_lens;
  std::vector<int32_t> q_lens;  // per request; uniform (q_len_per_req) unless `variable`
  bool variable = false;        // max_q_len + cum_seq_lens_q
  bool host_lengths = false;    // a BatchDecodePlan with FlashInfer's page table, not the TensorRT-LLM entry
  int page_size = 16, hq = 8, hkv = 2, d = 128;
  DType q = DType::BF16, kv = DType::BF16;
  KVLayout layout = KVLayout::HND;
  int window_left = -1;
  bool sinks = false;
  float soft_cap = 0.f;  // host_lengths only (the TensorRT-LLM entry has none)
  bool rope = false;     // host_lengths only, as the soft cap
  bool tensor_cores = false;  // host_lengths: use_tensor_cores (several tokens take them anyway)

  int64_t tokens() const { return std::accumulate(q_lens.begin(), q_lens.end(), int64_t(0)); }
  int max_q() const { return *std::max_element(q_lens.begin(), q_lens.end()); }
  std::string label() const {
    return fmt::format("{} kv_lens={} q_lens={}{} ps={} {}q/{}kv d={} {}/{} {} window={} sinks={} cap={}{}{}",
                       host_lengths ? "plan(host lengths)" : "trtllm", kv_lens, q_lens,
                       variable ? " (cum_seq_lens_q)" : "", page_size, hq, hkv, d, to_string(q), to_string(kv),
                       to_string(layout), window_left, sinks, soft_cap, rope ? " rope" : "",
                       tensor_cores ? " use_tensor_cores" : "");
  }
};

using Errors = TokenErrors;

Errors compare(const SpecCase& c, const PagedBatch& b, const std::vector<double>& out, const std::vector<double>& lse) {
  const std::vector<double> sinks = sink_logits(c.hq);
  TokenReference ref = token_reference_of(c, c.kv_lens, c.q_lens);
  ref.window_left = c.window_left;
  ref.soft_cap = c.soft_cap;
  if (c.rope) ref.pos_encoding = PosEncoding::RopeLlama;
  ref.sinks = c.sinks ? &sinks : nullptr;
  return compare_tokens(ref, b, out, lse);
}

// The case's problem with the page table and lengths still to choose: heads,
// dtypes, layout, window, and the query tokens (uniform, or up to max_q_len per request).
BatchDecodeProblem problem_of(const SpecCase& c) {
  BatchDecodeProblem p = batch_decode_problem(paged_shape_of(c, c.kv_lens, c.tokens()));
  p.options.window_left = c.window_left;
  if (c.variable) p.max_q_len = c.max_q();
  else p.q_len_per_req = c.q_lens[0];
  return p;
}

// Runs one case; `split` is set to whether the plan cut some request's KV
// into chunks (so the merge kernel ran).
Errors run_case(const Runtime& rt, const SpecCase& c, uint32_t seed, bool* split = nullptr) {
  cuda::ScopedDevice scope(0);
  DevicePagedBatch d(paged_shape_of(c, c.kv_lens, c.tokens()), seed);
  const int64_t B = d.batch();
  const TensorView tq = d.q_view(), tk = d.cache_view(d.k), tv = d.cache_view(d.v), to = d.out_view(),
                   tl = d.lse_view();
  DeviceBuffer ws(256 << 20);
  std::vector<int32_t> cum{0};
  for (int32_t n : c.q_lens) cum.push_back(cum.back() + n);
  const DeviceBuffer dcum = upload_ints(cum), sinks = upload_floats(sink_logits(c.hq));
  const float* sink_ptr = c.sinks ? sinks.as<float>() : nullptr;

  if (c.host_lengths) {
    BatchDecodeProblem p = problem_of(c);
    p.options.return_lse = true;
    if (c.soft_cap > 0) p.options.logits_soft_cap = c.soft_cap;
    if (c.rope) p.options.pos_encoding_mode = PosEncoding::RopeLlama;
    p.options.use_tensor_cores = c.tensor_cores;
    BatchDecodePlan plan(rt, p);
    plan.plan(c.kv_lens.data(), static_cast<int>(B), nullptr);
    if (split) *split = plan.num_work_items() > B;
    BatchDecodeLaunchExtras extras;
    extras.sinks = sink_ptr;
    extras.cum_seq_lens_q = c.variable ? dcum.as<int32_t>() : nullptr;
    plan.run(tq, d.paged_kv(tk, tv), to, &tl, ws.get(), ws.bytes(), nullptr, 1.f, 1.f, extras);
  } else {
    TrtllmDecodeArgs a = trtllm_args(d);
    a.window_left = c.window_left;
    a.sinks = sink_ptr;
    if (c.variable) {
      a.cum_seq_lens_q = dcum.as<int32_t>();
      a.max_q_len = c.max_q();
      a.batch_size = static_cast<int>(B);
    } else {
      a.q_len_per_req = c.q_lens[0];
    }
    trtllm_batch_decode_with_kv_cache(rt, tq, tk, tv, ws.get(), ws.bytes(), a, to, &tl);
    if (split) {
      // The uniform split the entry's memoized plan chose, from the same problem.
      BatchDecodeProblem p = problem_of(c);
      p.page_table = PageTable::BlockTable;
      p.host_lengths = false;
      p.max_seq_len = a.max_seq_len;
      *split = BatchDecodePlan(rt, p).num_work_items() > B;
    }
  }
  ATTNJIT_CU(cuda::driver().CtxSynchronize());  // before the tables go out of scope
  const auto out = decode(c.q, d.out.download());
  const auto lse = decode(DType::F32, d.lse.download());
  return compare(c, d.host, out, lse);
}

// The grid: q_len_per_req 1-4 x groups 1/4/5/8 x head dims 64/128, cycling
// page size, KV dtype, layout, KV heads and batches whose lengths are not
// page multiples.
std::vector<SpecCase> grid() {
  std::vector<SpecCase> cases;
  const std::vector<std::vector<int32_t>> batches = {{37, 100, 21, 513}, {4, 1000}, {250, 7, 1600}};
  int turn = 0;
  for (int q_len : {1, 2, 3, 4})
    for (int group : {1, 4, 5, 8})
      for (int d : {64, 128}) {
        SpecCase c;
        c.kv_lens = batches[turn % batches.size()];
        c.q_lens.assign(c.kv_lens.size(), q_len);
        c.page_size = turn % 2 ? 1 : 16;
        c.hkv = 1 + turn % 2;
        c.hq = c.hkv * group;
        c.d = d;
        c.kv = turn % 3 == 1 ? DType::E4M3 : DType::BF16;
        c.layout = turn % 4 < 2 ? KVLayout::HND : KVLayout::NHD;
        cases.push_back(c);
        ++turn;
      }
  return cases;
}

// Each case on the GPU (the test skips without one) against the float64 reference, seeds from `seed` on.
void check_cases(const std::vector<SpecCase>& cases, uint32_t seed, bool expect_split = false) {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  for (const auto& c : cases) {
    INFO(c.label());
    bool split = false;
    const Errors e = run_case(rt, c, seed++, &split);
    CHECK(e.o_rel <= o_tol(c.q));
    CHECK(e.lse_abs <= lse_tol(c.q));
    if (expect_split) CHECK(split);  // else the case would not test the merge
  }
}

}  // namespace

TEST_CASE("speculative batch decode matches the float64 reference: q_len_per_req 1-4, groups 1/4/5/8",
          "[gpu][batch_decode][speculative]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  check_token_grid(
      grid(), 100, "speculative batch decode grid", 22,
      [&](const SpecCase& c, uint32_t seed) { return run_case(rt, c, seed); },
      [](const SpecCase& c) { return fmt::format("q_len {} {}", c.q_lens[0], to_string(c.kv)); });
}

TEST_CASE("speculative batch decode: split KV merges per query token", "[gpu][batch_decode][speculative][split]") {
  std::vector<SpecCase> cases;
  for (int group : {4, 5}) {  // one CTA of 4 x 3 rows; two of 5 x 2 and 5 x 1 rows
    SpecCase c;
    c.kv_lens = {20000, 9000};  // a small batch of long requests: cut to fill the GPU
    c.q_lens = {3, 3};
    c.hkv = 2;
    c.hq = 2 * group;
    c.kv = group == 5 ? DType::E4M3 : DType::BF16;
    c.d = group == 5 ? 64 : 128;
    cases.push_back(c);
  }
  {
    SpecCase c;  // the work list and per-request merge (host lengths), skewed
    c.host_lengths = true;
    c.kv_lens = {15000, 17, 64, 5};
    c.q_lens = {4, 4, 4, 4};
    c.hkv = 2;
    c.hq = 16;
    c.layout = KVLayout::NHD;
    cases.push_back(c);
  }
  check_cases(cases, 200, true);
}

TEST_CASE("speculative batch decode: windows start per query token", "[gpu][batch_decode][speculative][window]") {
  std::vector<SpecCase> cases;
  {
    SpecCase c;
    c.kv_lens = {1000, 57, 3000};
    c.q_lens = {4, 4, 4};
    c.window_left = 100;  // token 0 sees [L - 104, L - 4], token 3 [L - 101, L - 1]
    c.hkv = 1;
    c.hq = 5;
    c.page_size = 1;
    cases.push_back(c);
  }
  {
    SpecCase c;  // one long request, split inside the window
    c.kv_lens = {30000};
    c.q_lens = {3};
    c.window_left = 5000;
    c.hkv = 2;
    c.hq = 8;
    c.kv = DType::E4M3;
    cases.push_back(c);
  }
  {
    SpecCase c;  // a window shorter than the token block: the first tokens see fewer keys than the last
    c.kv_lens = {300, 9};
    c.q_lens = {4, 4};
    c.window_left = 2;
    c.hkv = 2;
    c.hq = 8;
    c.d = 64;
    cases.push_back(c);
  }
  check_cases(cases, 300);
}

TEST_CASE("speculative batch decode: sinks join every token's softmax once", "[gpu][batch_decode][speculative][sinks]") {
  std::vector<SpecCase> cases;
  for (bool long_one : {false, true}) {
    SpecCase c;
    c.kv_lens = long_one ? std::vector<int32_t>{15000, 300} : std::vector<int32_t>{40, 300, 77};
    c.q_lens.assign(c.kv_lens.size(), 2);
    c.sinks = true;  // unsplit: the decode epilogue adds them; split: the merge kernel
    c.hkv = 1;
    c.hq = 8;
    cases.push_back(c);
  }
  check_cases(cases, 400);
}

TEST_CASE("speculative batch decode: per-request query lengths (cum_seq_lens_q)",
          "[gpu][batch_decode][speculative][variable]") {
  std::vector<SpecCase> cases;
  {
    SpecCase c;
    c.variable = true;
    c.kv_lens = {50, 2000, 17, 300};
    c.q_lens = {1, 4, 2, 3};
    c.hkv = 2;
    c.hq = 8;
    c.page_size = 1;
    cases.push_back(c);
  }
  {
    SpecCase c;  // split, with a window and sinks: the merge finds each request's tokens through cum_seq_lens_q
    c.variable = true;
    c.kv_lens = {20000, 5};
    c.q_lens = {3, 1};
    c.window_left = 4000;
    c.sinks = true;
    c.hkv = 2;
    c.hq = 10;
    c.kv = DType::E4M3;
    c.d = 64;
    cases.push_back(c);
  }
  {
    SpecCase c;  // the host-lengths plan with per-request lengths and a soft cap
    c.host_lengths = true;
    c.variable = true;
    c.kv_lens = {9000, 33, 400};
    c.q_lens = {2, 4, 1};
    c.soft_cap = 30.f;
    c.hkv = 1;
    c.hq = 4;
    c.layout = KVLayout::NHD;
    cases.push_back(c);
  }
  check_cases(cases, 500);
}

TEST_CASE("batch decode with RoPE on tensor cores loses no lse to the rotation",
          "[gpu][batch_decode][speculative][rope]") {
  // The tensor-core skeleton rotates q and k in float and keeps each as a
  // rounded part and the rest (decode_mma.cuh: kSplitQK); rounding them once
  // cost up to 3e-2 of lse (bf16, base 2). Held here to the CUDA-core path's
  // order of error, not to the general bf16 tolerance.
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  std::vector<SpecCase> cases;
  for (int q_len : {1, 3})
    for (int group : {4, 5, 8})
      for (DType kv : {DType::BF16, DType::E4M3}) {
        SpecCase c;
        c.host_lengths = true;
        c.rope = true;
        c.tensor_cores = true;  // asked for; from group 4 the planner takes them by itself too
        c.kv_lens = {4096, 777, 33};
        c.q_lens = {q_len, q_len, q_len};
        c.hkv = 2;
        c.hq = 2 * group;
        c.kv = kv;
        c.layout = group == 5 ? KVLayout::NHD : KVLayout::HND;
        cases.push_back(c);
      }
  uint32_t seed = 700;
  double worst = 0;
  for (const auto& c : cases) {
    INFO(c.label());
    const Errors e = run_case(rt, c, seed++);
    CHECK(e.o_rel <= o_tol(c.q));
    CHECK(e.lse_abs <= 1e-3);
    worst = std::max(worst, e.lse_abs);
  }
  WARN(fmt::format("RoPE on tensor cores: worst abs err(lse, base 2) {:.2e} over {} cases", worst, cases.size()));
}

}  // namespace attnjit::test

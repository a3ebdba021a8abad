// Every kernel variant every registered operator can generate compiles with
// NVRTC for sm_80 and sm_90a, so a broken template fails CI even without a GPU.
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "codegen.hpp"
#include "cuda/nvrtc.hpp"
#include "ops/registry.hpp"

using namespace attnjit;

TEST_CASE("the registry lists every operator, each with a variant grid", "[registry]") {
  std::set<std::string> names;
  for (const auto& op : ops::operators()) {
    INFO(op.name);
    CHECK(names.insert(op.name).second);
    CHECK(&ops::find_operator(op.name) == &op);
    CHECK_FALSE(op.variant_grid().empty());
    CHECK_FALSE(op.bench_problems().empty());
    for (const auto& p : op.variant_grid()) CHECK(p.at("op") == op.name);
  }
  CHECK(names == std::set<std::string>{"single_decode", "batch_decode", "single_prefill", "page", "batch_prefill",
                                       "merge_state"});
  CHECK_THROWS_WITH(ops::find_operator("prefil"), Catch::Contains("known: single_decode, batch_decode, single_prefill"));
}

namespace {

void compile_all(const std::map<std::string, KernelSpec>& specs) {
  std::vector<std::pair<KernelSpec, std::string>> jobs;
  for (const auto& [name, s] : specs)
    for (const char* arch : {"sm_80", "sm_90a"})
      if (s.supports_arch(arch)) jobs.emplace_back(s, arch);  // the Hopper prefill skeleton: sm_90a only

  std::atomic<size_t> next{0};
  std::mutex mu;
  std::vector<std::string> failures;
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      const auto& [spec, arch] = jobs[i];
      try {
        const TranslationUnit tu = generate(spec);
        cuda::CompileRequest req{tu.source, tu.name, tu.headers, {"-std=c++17"}, arch};
        const auto res = cuda::compile("", req);
        if (res.cubin.size() < 4 || res.cubin[0] != 0x7f) throw std::runtime_error("not an ELF cubin");
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(spec.name() + " " + arch + ": " + e.what());
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::max(2u, std::thread::hardware_concurrency()); ++w) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
  WARN(jobs.size() << " variant compiles (" << specs.size() << " specs, each for the archs it supports of sm_80, sm_90a)");
}

}  // namespace

// One section per operator, so one family can be checked alone:
//   attnjit_tests "NVRTC compiles every variant*" -c batch_decode
// A spec an earlier section of this run compiled (batch prefill's merge is
// single prefill's) is not compiled again.
TEST_CASE("NVRTC compiles every variant of every operator for sm_80 and sm_90a", "[nvrtc][variants]") {
  static std::set<std::string> compiled;
  for (const auto& op : ops::operators()) {
    DYNAMIC_SECTION(op.name) {
      std::map<std::string, KernelSpec> specs;
      for (const auto& problem : op.variant_grid())
        for (const auto& s : op.kernels_for(problem))
          if (!compiled.count(s.identity())) specs.emplace(s.identity(), s);
      compile_all(specs);
      for (const auto& [identity, s] : specs) compiled.insert(identity);
    }
  }
}

// The warp-specialized Hopper prefill (kernels/prefill_sm90_ws.cuh) in every
// variant it serves, for sm_90a, with ptxas' report: no spills (its consumers
// run at 232-240 registers after setmaxnreg) and no wgmma serialized by
// ptxas (which would undo the overlap of softmax with the products). Each
// compile's seconds are the cold-JIT figure (target: 3 s on 2 cores).
//   attnjit_tests "[fa3_ws]"
TEST_CASE("NVRTC compiles the warp-specialized prefill without spills", "[nvrtc][fa3_ws]") {
  struct Case {
    int head_dim;
    MaskMode mask;
    PosEncoding pos;
    bool soft_cap, window;
    KVSource source;
    DType dtype;
  };
  std::vector<Case> cases;
  for (int d : {64, 128, 256})
    for (KVSource src : {KVSource::Contiguous, KVSource::Ragged, KVSource::Paged}) {
      cases.push_back({d, MaskMode::Causal, PosEncoding::None, false, false, src, DType::BF16});
      cases.push_back({d, MaskMode::None, PosEncoding::None, false, false, src, DType::F16});
    }
  for (KVSource src : {KVSource::Contiguous, KVSource::Paged}) {
    cases.push_back({128, MaskMode::Custom, PosEncoding::None, false, false, src, DType::BF16});
    cases.push_back({128, MaskMode::Causal, PosEncoding::None, false, true, src, DType::BF16});
    cases.push_back({128, MaskMode::None, PosEncoding::None, true, false, src, DType::BF16});
    cases.push_back({128, MaskMode::Causal, PosEncoding::Alibi, false, false, src, DType::F16});
  }
  // RoPE: K gathered and rotated by the producer on every source (72
  // registers, consumers 216); 256-wide heads are refused (every split spilled).
  for (int d : {64, 128})
    for (KVSource src : {KVSource::Contiguous, KVSource::Ragged, KVSource::Paged})
      cases.push_back({d, MaskMode::Causal, PosEncoding::RopeLlama, false, false, src, DType::BF16});
  cases.push_back({128, MaskMode::None, PosEncoding::RopeLlama, false, false, KVSource::Ragged, DType::F16});
  cases.push_back({128, MaskMode::Custom, PosEncoding::RopeLlama, true, true, KVSource::Paged, DType::BF16});
  cases.push_back({256, MaskMode::Causal, PosEncoding::Alibi, true, true, KVSource::Ragged, DType::BF16});
  cases.push_back({64, MaskMode::Custom, PosEncoding::None, true, true, KVSource::Ragged, DType::BF16});
  // fp8 (e4m3 q, K and V; a bf16 or f16 output): TMA sources, 128-wide heads.
  for (KVSource src : {KVSource::Contiguous, KVSource::Ragged}) {
    cases.push_back({128, MaskMode::None, PosEncoding::None, false, false, src, DType::E4M3});
    cases.push_back({128, MaskMode::Causal, PosEncoding::None, false, true, src, DType::E4M3});
  }
  cases.push_back({128, MaskMode::Custom, PosEncoding::None, false, false, KVSource::Ragged, DType::E4M3});

  std::atomic<size_t> next{0};
  std::mutex mu;
  double slowest = 0;
  std::string slowest_name;
  std::vector<std::string> failures, reports;  // Catch2's macros are not thread-safe: reported after the join
  auto worker = [&] {
    for (size_t i; (i = next++) < cases.size();) {
      const Case& c = cases[i];
      PrefillKernel k;
      k.backend = PrefillBackend::Fa3;
      k.warp_specialized = true;
      k.frags_m = 2;
      k.stages = 2;
      k.head_dim = c.head_dim;
      k.window = c.window;
      k.kv_source = c.source;
      k.variant.q_dtype = k.variant.kv_dtype = k.variant.o_dtype = c.dtype;
      if (c.dtype == DType::E4M3) k.variant.o_dtype = c.mask == MaskMode::Causal ? DType::F16 : DType::BF16;
      k.variant.mask = c.mask;
      k.variant.pos_encoding = c.pos;
      k.variant.soft_cap = c.soft_cap;
      std::string failure;
      try {
        k.validate();
        const TranslationUnit tu = generate(KernelSpec(k));
        cuda::CompileRequest req{tu.source, tu.name, tu.headers, {"-std=c++17", "--ptxas-options=-v"}, "sm_90a"};
        const auto res = cuda::compile("", req);
        std::lock_guard<std::mutex> lock(mu);
        if (res.seconds > slowest) slowest = res.seconds, slowest_name = k.name();
        // Known, bounded spills (ptxas, 2026-11-27): 256-wide heads with a
        // window or soft cap (O alone is 128 registers; 32-72 bytes) and a
        // custom mask on paged K/V (the gather producer keeps 8 more
        // registers than TMA's; 8 bytes). Everything else: none.
        const bool known = (c.head_dim == 256 && (c.window || c.soft_cap)) ||
                           (c.mask == MaskMode::Custom && c.source == KVSource::Paged);
        const size_t at = res.log.find("bytes spill stores");
        const size_t pos = at == std::string::npos ? at : res.log.rfind(' ', at - 2);
        const long spilled = pos == std::string::npos ? -1 : std::stol(res.log.substr(pos + 1, at - pos - 1));
        const bool spills = spilled < 0 || spilled > (known ? 96 : 0);
        const bool serialized = res.log.find("serialized") != std::string::npos;
        if (spills || serialized) failure = k.name() + ": " + res.log;
        const size_t used = res.log.find("Used");
        reports.push_back(k.name() + ": " + (used == std::string::npos ? res.log : res.log.substr(used, 60)) + " " +
                          std::to_string(res.seconds) + " s");
      } catch (const std::exception& e) {
        failure = k.name() + ": " + e.what();
      }
      if (!failure.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(failure);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::max(2u, std::thread::hardware_concurrency()); ++w) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
  for (const auto& r : reports) WARN(r);
  WARN(cases.size() << " warp-specialized variants; slowest compile " << slowest << " s (" << slowest_name << ")");
}

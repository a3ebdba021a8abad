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

// Every decode and merge variant the test grid generates compiles with NVRTC
// for sm_80 and sm_90a, so a broken template fails CI even without a GPU.
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <thread>

#include "codegen.hpp"
#include "cuda/nvrtc.hpp"
#include "planner/single_decode_planner.hpp"
#include "reference/decode_grid.hpp"

using namespace attnjit;

TEST_CASE("NVRTC compiles every decode variant of the grid for sm_80 and sm_90a", "[nvrtc][variants]") {
  std::map<std::string, KernelSpec> specs;
  for (const auto& c : test::decode_grid())
    for (const auto& s : planner::kernels_for(c.p)) specs.emplace(s.name(), s);
  std::vector<std::pair<KernelSpec, std::string>> jobs;
  for (const auto& [name, s] : specs)
    for (const char* arch : {"sm_80", "sm_90a"}) jobs.emplace_back(s, arch);

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
  WARN(jobs.size() << " variant compiles (" << specs.size() << " specs x 2 archs)");
}

// Threads planning the same kernel at once through one Engine: one compile,
// one registry entry, every thread gets the same kernel. Also the target of
// the ThreadSanitizer job (tools/ci/sanitizers.sh), which runs [concurrency].
// Needs NVRTC (one small sm_80 compile), never a GPU.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "engine.hpp"
#include "support/cache_support.hpp"
#include "support/temp_cache_engine.hpp"

namespace attnjit::test {

TEST_CASE("threads preparing one spec concurrently compile it once and share the kernel", "[engine][concurrency]") {
  ATTNJIT_REQUIRE_NVRTC();
  TempCacheEngine temp;
  detail::Engine& engine = temp.engine;
  MergeKernel merge;
  merge.head_dim = 64;
  merge.o_dtype = DType::F16;
  merge.warps = 4;
  const KernelSpec spec = merge;

  constexpr int kThreads = 6;
  std::vector<detail::Prepared> got(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      ++ready;
      while (ready < kThreads) std::this_thread::yield();  // start together
      got[t] = engine.prepare(spec, "sm_80");
    });
  for (auto& th : pool) th.join();

  int compiled = 0;
  for (const auto& p : got) {
    compiled += p.origin == detail::Origin::Compiled;
    CHECK(p.kernel == got[0].kernel);
  }
  CHECK(compiled == 1);
  CHECK(engine.prepare(spec, "sm_80").origin == detail::Origin::Memory);
  CHECK(fs::exists(engine.disk_cache().entry_path("sm_80", got[0].kernel->key)));
}

}  // namespace attnjit::test

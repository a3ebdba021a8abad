// Compiles a grid's kernels up front on every core, so a GPU test's time goes
// to checking rather than to serial NVRTC runs. Through the public
// introspection API (introspect::prepare) for the first GPU's arch.
#pragma once
#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "attnjit/introspection.hpp"
#include "attnjit/runtime.hpp"
#include "spec/kernel_spec.hpp"

namespace attnjit::test {

// Each distinct spec (by name) once; the first compile error is rethrown here,
// so it fails the test instead of reaching std::terminate.
inline void prewarm_in_parallel(const Runtime& rt, const std::vector<KernelSpec>& specs) {
  std::map<std::string, KernelSpec> distinct;
  for (const auto& s : specs) distinct.emplace(s.name(), s);
  std::vector<KernelSpec> list;
  for (auto& [name, s] : distinct) list.push_back(s);
  const std::string arch = rt.default_arch();
  std::atomic<size_t> next{0};
  std::mutex failed_mutex;
  std::exception_ptr failed;
  std::vector<std::thread> pool;
  const unsigned workers = std::max(2u, std::thread::hardware_concurrency());
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      try {
        for (size_t i; (i = next++) < list.size();) introspect::prepare(rt, list[i], arch);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failed_mutex);
        if (!failed) failed = std::current_exception();
      }
    });
  for (auto& t : pool) t.join();
  if (failed) std::rethrow_exception(failed);
}

// A grid's kernels: `kernels_of(c.p)` for each case c (its problem `p`).
template <class Case, class KernelsOf>
void prewarm_grid(const Runtime& rt, const std::vector<Case>& cases, KernelsOf kernels_of) {
  std::vector<KernelSpec> specs;
  for (const auto& c : cases)
    for (const auto& s : kernels_of(c.p)) specs.push_back(s);
  prewarm_in_parallel(rt, specs);
}

}  // namespace attnjit::test

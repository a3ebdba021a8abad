#include "attnjit/prewarm.hpp"

#include "engine.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_decode/single_decode_problem.hpp"

namespace attnjit {

std::vector<PrewarmedKernel> prewarm_single_decode(const Runtime& rt, const SingleDecodeProblem& problem,
                                                   const std::string& arch) {
  const std::string target = arch.empty() ? rt.default_arch() : arch;
  std::vector<PrewarmedKernel> out;
  for (const KernelSpec& spec : ops::single_decode_kernels(problem)) {
    const detail::Prepared p = rt.engine().prepare(spec, target);
    out.push_back({spec.name(), target, detail::to_string(p.origin),
                   p.origin == detail::Origin::Compiled ? p.kernel->compile_seconds : 0.0});
  }
  return out;
}

}  // namespace attnjit

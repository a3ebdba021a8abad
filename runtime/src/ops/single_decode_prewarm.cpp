#include "attnjit/prewarm.hpp"

#include "engine.hpp"
#include "planner/single_decode_planner.hpp"

namespace attnjit {

std::vector<PrewarmedKernel> prewarm_single_decode(const Runtime& rt, const SingleDecodeProblem& problem,
                                                   const std::string& arch) {
  planner::validate(problem);
  const std::string target = arch.empty() ? rt.default_arch() : arch;
  std::vector<PrewarmedKernel> out;
  for (const KernelSpec& spec : planner::kernels_for(problem)) {
    const detail::Prepared p = rt.engine().prepare(spec, target);
    out.push_back({spec.name(), target, detail::to_string(p.origin),
                   p.origin == detail::Origin::Compiled ? p.kernel->compile_seconds : 0.0});
  }
  return out;
}

}  // namespace attnjit

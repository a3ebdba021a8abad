#include "ops/operator.hpp"

#include <fmt/format.h>

namespace attnjit::ops {

nlohmann::json launch_json(const KernelLaunch& k) {
  return {{"role", k.role},
          {"kernel", k.spec.name()},
          {"spec", k.spec.to_json()},
          {"grid", {k.shape.grid[0], k.shape.grid[1], k.shape.grid[2]}},
          {"threads", k.shape.threads},
          {"smem_bytes", k.shape.smem_bytes}};
}

std::string launch_text(const KernelLaunch& k) {
  return fmt::format("{} grid=({},{},{}) threads={} smem={}", k.spec.name(), k.shape.grid[0], k.shape.grid[1],
                     k.shape.grid[2], k.shape.threads, k.shape.smem_bytes);
}

nlohmann::json kernels_json(const KernelLaunch& main, const std::optional<KernelLaunch>& merge) {
  nlohmann::json kernels = nlohmann::json::array({launch_json(main)});
  if (merge) kernels.push_back(launch_json(*merge));
  return kernels;
}

}  // namespace attnjit::ops

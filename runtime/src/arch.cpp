#include "arch.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "attnjit/error.hpp"

namespace attnjit {

const std::vector<std::string>& known_archs() {
  static const std::vector<std::string> archs = [] {
    std::vector<std::string> out;
    for (int n : {80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121}) {
      out.push_back(fmt::format("sm_{}", n));
      if (n >= 90) out.push_back(fmt::format("sm_{}a", n));
      if (n >= 100) out.push_back(fmt::format("sm_{}f", n));
    }
    return out;
  }();
  return archs;
}

bool is_known_arch(std::string_view arch) {
  const auto& k = known_archs();
  return std::find(k.begin(), k.end(), arch) != k.end();
}

void check_arch(std::string_view arch, std::string_view arg) {
  if (is_known_arch(arch)) return;
  throw Error(Status::InvalidArgument,
              fmt::format("{}='{}' is not a known arch; allowed: {}", arg, arch, fmt::join(known_archs(), ", ")));
}

bool has_pdl(std::string_view arch) {
  int n = 0;  // "sm_90a" -> 90
  for (size_t i = 3; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) n = n * 10 + (arch[i] - '0');
  return arch.substr(0, 3) == "sm_" && n >= 90;
}

bool choose_pdl(std::string_view arch, std::optional<bool> enable_pdl) {
  const bool capable = has_pdl(arch);
  if (enable_pdl.value_or(false) && !capable)
    throw Error(Status::Unsupported,
                fmt::format("enable_pdl=true needs sm_90 or newer (programmatic dependent launch); this device is {}; "
                            "allowed: false or unset",
                            arch));
  return enable_pdl.value_or(capable);
}

}  // namespace attnjit

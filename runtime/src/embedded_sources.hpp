// Device headers (kernels/) and instantiation templates (templates/), embedded
// at build time by cmake/embed_sources.cmake.
#pragma once
#include <string_view>
#include <vector>

namespace attnjit::embedded {

struct Source {
  std::string_view name;  // path relative to kernels/ or templates/
  std::string_view text;
};

const std::vector<Source>& headers();
const std::vector<Source>& templates();

}  // namespace attnjit::embedded

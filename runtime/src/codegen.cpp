#include "codegen.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "embedded_sources.hpp"

namespace attnjit {

std::string fill_template(const std::string& text, const std::vector<std::pair<std::string, std::string>>& values,
                          const std::string& template_name) {
  std::string out = text;
  for (const auto& [key, value] : values) {
    const std::string marker = "{{" + key + "}}";
    size_t pos = out.find(marker);
    if (pos == std::string::npos)
      throw Error(Status::Internal, fmt::format("template {} has no placeholder {}", template_name, marker));
    for (; pos != std::string::npos; pos = out.find(marker, pos + value.size())) out.replace(pos, marker.size(), value);
  }
  if (size_t left = out.find("{{"); left != std::string::npos)
    throw Error(Status::Internal, fmt::format("template {} left unfilled: {}", template_name, out.substr(left, 40)));
  return out;
}

TranslationUnit generate(const KernelSpec& spec) {
  const std::string tname = spec.template_name();
  for (const auto& t : embedded::templates()) {
    if (t.name != tname) continue;
    TranslationUnit tu;
    tu.name = spec.name() + ".cu";
    tu.source = fill_template(std::string(t.text), spec.template_values(), tname);
    for (const auto& h : embedded::headers()) tu.headers.emplace_back(std::string(h.name), std::string(h.text));
    return tu;
  }
  throw Error(Status::Internal, fmt::format("template {} is not embedded in this build", tname));
}

}  // namespace attnjit

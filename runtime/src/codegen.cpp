#include "codegen.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "embedded_sources.hpp"
#include "spec/user_variant.hpp"

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

namespace {

// The user variant of the attention families and the block mask, or null.
const VariantSource* user_variant_of(const KernelSpec& spec) {
  if (const auto* d = spec.as<DecodeKernel>()) return d->variant.user.get();
  if (const auto* p = spec.as<PrefillKernel>()) return p->variant.user.get();
  if (const auto* b = spec.as<BlockMaskKernel>()) return b->user.get();
  return nullptr;
}

}  // namespace

TranslationUnit generate(const KernelSpec& spec) {
  const std::string tname = spec.template_name();
  for (const auto& t : embedded::templates()) {
    if (t.name != tname) continue;
    TranslationUnit tu;
    tu.name = spec.name() + ".cu";
    tu.source = fill_template(std::string(t.text), spec.template_values(), tname);
    // A user variant's Params and snippets go first: the skeleton's hooks call them.
    if (const VariantSource* user = user_variant_of(spec)) {
      tu.source = variant_device_code(*user, tu.name) + tu.source;
      tu.options = {"--prec-div=false"};
    }
    for (const auto& h : embedded::headers()) tu.headers.emplace_back(std::string(h.name), std::string(h.text));
    return tu;
  }
  throw Error(Status::Internal, fmt::format("template {} is not embedded in this build", tname));
}

}  // namespace attnjit

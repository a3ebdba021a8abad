#include "spec/kernel_spec.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "spec/json_fields.hpp"

namespace attnjit {

namespace {

template <class T> struct Tag { using type = T; };

// from_json over every alternative of the variant: the one whose kFamily
// matches parses. A fold over the alternatives, so adding a family to the
// variant is the only change.
template <size_t... I>
KernelSpec parse_family(const std::string& name, const nlohmann::json& j, std::index_sequence<I...>) {
  KernelSpec out;
  bool found = false;
  auto try_one = [&](auto tag) {
    using F = typename decltype(tag)::type;
    if (!found && name == F::kFamily) {
      out = KernelSpec(F::from_json(j));
      found = true;
    }
  };
  (try_one(Tag<std::variant_alternative_t<I, KernelSpec::Family>>{}), ...);
  if (!found)
    throw Error(Status::InvalidArgument,
                fmt::format("spec.family='{}' is not a kernel family; allowed: {}", name, kernel_family_names()));
  return out;
}

template <size_t... I>
std::string family_names(std::index_sequence<I...>) {
  std::vector<std::string> names = {std::variant_alternative_t<I, KernelSpec::Family>::kFamily...};
  return fmt::format("{}", fmt::join(names, ", "));
}

constexpr auto kFamilies = std::make_index_sequence<std::variant_size_v<KernelSpec::Family>>{};

}  // namespace

std::string kernel_family_names() { return family_names(kFamilies); }

const char* KernelSpec::family_name() const {
  return std::visit([](const auto& f) { return std::decay_t<decltype(f)>::kFamily; }, family_);
}
const char* KernelSpec::template_name() const {
  return std::visit([](const auto& f) { return f.template_name(); }, family_);
}
const char* KernelSpec::entry_name() const {
  return std::visit([](const auto& f) { return f.entry_name(); }, family_);
}
std::string KernelSpec::name() const {
  return std::visit([](const auto& f) { return f.name(); }, family_);
}
int KernelSpec::threads() const {
  return std::visit([](const auto& f) { return f.threads(); }, family_);
}
int KernelSpec::dynamic_smem_bytes() const {
  return std::visit([](const auto& f) { return f.dynamic_smem_bytes(); }, family_);
}
bool KernelSpec::supports_arch(const std::string& arch) const {
  return std::visit([&](const auto& f) { return f.supports_arch(arch); }, family_);
}
nlohmann::json KernelSpec::to_json() const {
  return std::visit([](const auto& f) { return f.to_json(); }, family_);
}
void KernelSpec::validate() const {
  std::visit([](const auto& f) { f.validate(); }, family_);
  // A spec whose shared memory no supported GPU grants one CTA can never launch.
  if (dynamic_smem_bytes() > kMaxDynamicSmemBytes)
    throw Error(Status::InvalidArgument,
                fmt::format("{} spec needs {} B of shared memory; allowed: at most {} B per CTA", family_name(),
                            dynamic_smem_bytes(), kMaxDynamicSmemBytes));
}

KernelSpec KernelSpec::from_json(const nlohmann::json& j) {
  try {
    return parse_family(spec_json::string_field(j, "family"), j, kFamilies);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Status::InvalidArgument, fmt::format("kernel spec JSON is malformed: {} (in {})", e.what(), j.dump()));
  }
}

std::vector<std::pair<std::string, std::string>> KernelSpec::template_values() const {
  auto v = std::visit([](const auto& f) { return f.template_values(); }, family_);
  v.emplace_back("NAME", name());
  v.emplace_back("SPEC_JSON", to_json().dump());
  return v;
}

}  // namespace attnjit

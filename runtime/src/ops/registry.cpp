#include "ops/registry.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "ops/operator_entries.hpp"

namespace attnjit::ops {

const std::vector<OperatorEntry>& operators() {
  // One line per operator.
  static const std::vector<OperatorEntry> entries = {
      single_decode_entry(),
      batch_decode_entry(),
      single_prefill_entry(),
      page_entry(),
      batch_prefill_entry(),
      merge_state_entry(),
  };
  return entries;
}

std::string operator_names() {
  std::vector<std::string> names;
  for (const auto& e : operators()) names.emplace_back(e.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

const OperatorEntry& find_operator(std::string_view name) {
  for (const auto& e : operators())
    if (name == e.name) return e;
  throw Error(Status::InvalidArgument,
              fmt::format("op='{}' is not an operator; known: {}", name, operator_names()));
}

}  // namespace attnjit::ops

// The operators the library offers, for tools that treat them alike.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "ops/operator.hpp"

namespace attnjit::ops {

const std::vector<OperatorEntry>& operators();
// Error(InvalidArgument) listing the known names when `name` is not one.
const OperatorEntry& find_operator(std::string_view name);
std::string operator_names();  // "single_decode, ..."

}  // namespace attnjit::ops

// The error most argument checks raise: Error(InvalidArgument) with a message
// that names the argument, its value and what is allowed.
#pragma once
#include <string>

#include "attnjit/error.hpp"

namespace attnjit {

[[noreturn]] inline void invalid(const std::string& message) { throw Error(Status::InvalidArgument, message); }

}  // namespace attnjit

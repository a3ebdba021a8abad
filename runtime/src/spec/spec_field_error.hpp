// The error every kernel family's validate() raises for a field outside what
// its template compiles, worded alike: "<family> spec.<field>=<value> is not
// supported; allowed: <allowed>".
#pragma once
#include <fmt/format.h>

#include <string>

#include "attnjit/error.hpp"

namespace attnjit {

[[noreturn]] inline void unsupported_spec_field(const char* family, const char* field, int value,
                                                const std::string& allowed) {
  throw Error(Status::InvalidArgument,
              fmt::format("{} spec.{}={} is not supported; allowed: {}", family, field, value, allowed));
}

}  // namespace attnjit

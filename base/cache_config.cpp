#include "attnjit/cache_config.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"

namespace attnjit {

const char* to_string(CacheMode m) noexcept {
  switch (m) {
    case CacheMode::ReadWrite: return "readwrite";
    case CacheMode::ReadOnly: return "readonly";
    case CacheMode::Off: return "off";
    case CacheMode::Require: return "require";
  }
  return "?";
}

CacheMode parse_cache_mode(std::string_view s, std::string_view arg) {
  if (s == "readwrite" || s == "rw") return CacheMode::ReadWrite;
  if (s == "readonly" || s == "ro") return CacheMode::ReadOnly;
  if (s == "off") return CacheMode::Off;
  if (s == "require") return CacheMode::Require;
  throw Error(Status::InvalidArgument,
              fmt::format("{}='{}' is not a cache mode; allowed: readwrite, readonly, off, require", arg, s));
}

}  // namespace attnjit

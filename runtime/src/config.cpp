#include "attnjit/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>

#include "attnjit/error.hpp"

namespace attnjit {

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}
}  // namespace

std::string Config::default_cache_dir() {
  if (auto d = env("ATTNJIT_CACHE_DIR"); !d.empty()) return d;
  if (auto x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/attnjit";
  if (auto h = env("HOME"); !h.empty()) return h + "/.cache/attnjit";
  return "/tmp/attnjit-cache";
}

Config Config::from_env() {
  Config c;
  c.cache.dir = default_cache_dir();
  if (auto m = env("ATTNJIT_CACHE_MODE"); !m.empty()) c.cache.mode = parse_cache_mode(m, "ATTNJIT_CACHE_MODE");
  if (auto b = env("ATTNJIT_CACHE_MAX_BYTES"); !b.empty()) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(b.c_str(), &end, 10);
    if (end == b.c_str() || *end != '\0' || v == 0)
      throw Error(Status::InvalidArgument,
                  fmt::format("ATTNJIT_CACHE_MAX_BYTES='{}' is not a positive byte count", b));
    c.cache.max_bytes = v;
  }
  c.nvrtc_library = env("ATTNJIT_NVRTC_LIBRARY");
  c.log_level = env("ATTNJIT_LOG_LEVEL");
  // Checked here, with the other variables, so that every entry point refuses
  // a typo (not only those that construct an Engine, which sets the level).
  if (!c.log_level.empty()) {
    static const char* const kLevels[] = {"trace", "debug", "info", "warn", "warning", "error", "critical", "off"};
    if (std::find(std::begin(kLevels), std::end(kLevels), c.log_level) == std::end(kLevels))
      throw Error(Status::InvalidArgument,
                  fmt::format("ATTNJIT_LOG_LEVEL='{}' is not a log level; allowed: trace, debug, info, warn, error, off",
                              c.log_level));
  }
  return c;
}

}  // namespace attnjit

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
// "stderr", "off"/"" (none) or a file path. A path must contain a '/', so
// that "1" or "true" (meant as switches) fail loudly instead of creating a
// file of that name in whatever folder the process runs in.
std::string parse_telemetry(const std::string& v) {
  if (v.empty() || v == "off") return {};
  if (v == "stderr" || v.find('/') != std::string::npos) return v;
  throw Error(Status::InvalidArgument,
              fmt::format("ATTNJIT_TELEMETRY='{}' is not a target; allowed: stderr, off, or a file path "
                          "containing '/' (e.g. ./attnjit-events.jsonl or /var/log/attnjit.jsonl)", v));
}

// ATTNJIT_CHECK: "1" or "0" (unset: 0). Anything else fails loudly rather
// than leaving a user who meant to turn checking on without it.
bool parse_check(const std::string& v) {
  if (v.empty() || v == "0") return false;
  if (v == "1") return true;
  throw Error(Status::InvalidArgument,
              fmt::format("ATTNJIT_CHECK='{}' is not a switch; allowed: 1 (every run waits for its stream and checks "
                          "the device tables it read) or 0 (checked at the next call)",
                          v));
}

// ATTNJIT_PREFILL_PERSISTENT: "auto" (as unset), "1" or "0"; anything else
// fails loudly, as ATTNJIT_CHECK does.
Config::Persistence parse_persistence(const std::string& v) {
  if (v.empty() || v == "auto") return Config::Persistence::Auto;
  if (v == "1") return Config::Persistence::Always;
  if (v == "0") return Config::Persistence::Never;
  throw Error(Status::InvalidArgument,
              fmt::format("ATTNJIT_PREFILL_PERSISTENT='{}' is not allowed; allowed: auto (the planner's choice, as "
                          "unset), 1 (every fa3_ws prefill on persistent CTAs) or 0 (one CTA per item)",
                          v));
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
  if (auto b = env("ATTNJIT_CACHE_MAX_BYTES"); !b.empty())
    c.cache.max_bytes = parse_byte_count(b, "ATTNJIT_CACHE_MAX_BYTES");
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
  c.telemetry = parse_telemetry(env("ATTNJIT_TELEMETRY"));
  c.check_every_run = parse_check(env("ATTNJIT_CHECK"));
  c.persistent_prefill = parse_persistence(env("ATTNJIT_PREFILL_PERSISTENT"));
  return c;
}

}  // namespace attnjit

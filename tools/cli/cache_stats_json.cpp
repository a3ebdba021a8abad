// `attnjit cache stats --json`: the same facts as the text form, one JSON
// object on stdout, for dashboards and fleet scripts.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache_pack.hpp"

namespace attnjit::cli {

void print_stats_json(const Config& config, const cache::Stats& s, const std::string& writable) {
  const nlohmann::json j = {{"dir", s.dir},
                            {"mode", to_string(config.cache.mode)},
                            {"entries", s.entries},
                            {"bytes", s.bytes},
                            {"max_bytes", s.max_bytes},
                            // "yes", "no", or why not yet: the text form's wording, verbatim
                            {"writable", writable}};
  fmt::print("{}\n", j.dump());
}

}  // namespace attnjit::cli

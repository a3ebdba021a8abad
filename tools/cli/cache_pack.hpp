// `attnjit cache pack|unpack` (cache_pack.cpp) and `attnjit cache stats --json`
// (cache_stats_json.cpp), kept out of cache_cmd.cpp, which only registers them.
#pragma once
#include <string>

#include "attnjit/config.hpp"
#include "cache/disk_cache.hpp"

namespace CLI { class App; }

namespace attnjit::cli {

// Adds `pack` and `unpack` under the `cache` subcommand.
void register_cache_pack(CLI::App* cache);

// Prints one JSON object: the stats plus mode, cap and writability, for fleet tooling.
void print_stats_json(const Config& config, const cache::Stats& stats, const std::string& writable);

}  // namespace attnjit::cli

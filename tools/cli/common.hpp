// Helpers the CLI's subcommands share: configuration, option parsing and
// human-readable formatting.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attnjit/config.hpp"
#include "spec/kernel_spec.hpp"

namespace CLI { class App; class Validator; }

namespace attnjit::cli {

// Config::from_env(), with --cache-dir (when non-empty) replacing cache.dir.
Config load_config(const std::string& cache_dir);
// Adds --cache-dir to a subcommand (an empty value is refused by name).
void add_cache_dir_option(CLI::App* sub, std::string& cache_dir);
// Refuses an empty option value, which the commands would read as "not
// given" and so replace by a default; `instead` says what to give.
CLI::Validator not_empty(const std::string& instead);

std::string format_bytes(uint64_t bytes);       // "12.3 KiB"
std::string format_local_time(std::filesystem::file_time_type t);  // "2025-01-31 14:02:11"
bool stderr_is_terminal();

// Keeps the first spec of each KernelSpec::name(), in order.
std::vector<KernelSpec> dedupe_by_name(const std::vector<KernelSpec>& specs);

}  // namespace attnjit::cli

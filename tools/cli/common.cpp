#include "common.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <set>

#include "attnjit/error.hpp"

namespace attnjit::cli {

Config load_config(const std::string& cache_dir) {
  Config c = Config::from_env();
  if (!cache_dir.empty()) c.cache.dir = cache_dir;
  return c;
}

CLI::Validator not_empty(const std::string& instead) {
  return CLI::Validator(
      [instead](std::string& value) {
        return value.empty() ? "an empty value is not allowed; " + instead : std::string();
      },
      "", "not_empty");
}

void add_cache_dir_option(CLI::App* sub, std::string& cache_dir) {
  // Empty would otherwise mean "not given" (load_config) and write the default cache.
  sub->add_option("--cache-dir", cache_dir,
                  "Kernel cache folder (default: $ATTNJIT_CACHE_DIR, else $XDG_CACHE_HOME/attnjit, else "
                  "~/.cache/attnjit)")
      ->check(not_empty("give a folder, or leave --cache-dir out for the default ($ATTNJIT_CACHE_DIR, else "
                        "$XDG_CACHE_HOME/attnjit, else ~/.cache/attnjit)"));
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string format_local_time(std::filesystem::file_time_type t) {
  // C++17 has no clock_cast: carry the offset from "now" across the clocks.
  using namespace std::chrono;
  const auto sys = time_point_cast<system_clock::duration>(t - std::filesystem::file_time_type::clock::now() +
                                                           system_clock::now());
  const std::time_t tt = system_clock::to_time_t(sys);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

std::vector<KernelSpec> dedupe_by_name(const std::vector<KernelSpec>& specs) {
  std::vector<KernelSpec> out;
  std::set<std::string> seen;
  for (const auto& s : specs)
    if (seen.insert(s.name()).second) out.push_back(s);
  return out;
}

}  // namespace attnjit::cli

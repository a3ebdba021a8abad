// attnjit info: what this machine offers attnjit: library version, NVRTC,
// driver and devices (or why they are missing), target archs, the cache.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "attnjit/introspection.hpp"
#include "attnjit/runtime.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attnjit::cli {
namespace {

std::string driver_version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

void run_info(const std::string& cache_dir) {
  Runtime rt(load_config(cache_dir));
  const RuntimeInfo info = rt.info();

  fmt::print("attnjit {}\n", info.version);
  if (info.nvrtc_error.empty()) {
    const introspect::NvrtcFacts nv = introspect::nvrtc_facts(rt);
    fmt::print("nvrtc:    {} ({}{})\n", info.nvrtc_version, info.nvrtc_library,
               nv.path.empty() || nv.path == info.nvrtc_library ? std::string() : " -> " + nv.path);
    std::string archs;
    try {
      archs = fmt::format("{}", fmt::join(introspect::nvrtc_archs(rt), " "));
    } catch (const Error& e) {
      archs = fmt::format("unknown: {}", e.what());
    }
    fmt::print("archs:    {} (plus sm_<N>a for N >= 90)\n", archs);
  } else {
    fmt::print("nvrtc:    not available: {}\n", info.nvrtc_error);
  }
  if (info.driver_error.empty()) {
    fmt::print("driver:   CUDA {} ({})\n", driver_version_text(info.driver_version), info.driver_version);
    if (info.devices.empty()) fmt::print("devices:  none\n");
    for (const auto& d : info.devices)
      fmt::print("device {}: {}, {}, {} SMs, {}\n", d.ordinal, d.name, d.arch, d.sm_count, format_bytes(d.total_memory));
  } else {
    fmt::print("driver:   not available: {}\n", info.driver_error);
    fmt::print("devices:  none (prewarm and explain still work for a named --arch)\n");
  }
  fmt::print("default arch: {}\n", rt.default_arch());

  fmt::print("cache:    {}\n", info.cache.dir);
  fmt::print("  mode:     {}\n", to_string(info.cache.mode));
  // Tried, not assumed: see cache/write_probe.hpp.
  const bool mode_writes = info.cache.mode == CacheMode::ReadWrite || info.cache.mode == CacheMode::Require;
  fmt::print("  writable: {}\n", !mode_writes ? fmt::format("no: cache mode {} does not write", to_string(info.cache.mode))
                                  : !info.cache_writable ? "no: " + introspect::cache_not_writable_reason(rt)
                                                         : introspect::describe_write_probe(info.cache.dir));
  try {
    const introspect::CacheStats s = introspect::cache_stats(rt);
    fmt::print("  entries:  {} ({} of {} cap)\n", s.entries, format_bytes(s.bytes), format_bytes(s.max_bytes));
  } catch (const Error& e) {
    fmt::print("  entries:  unknown: {}\n", e.what());
  }
}

}  // namespace

void register_info(CLI::App& app) {
  auto cache_dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("info", "Library, NVRTC, driver, devices, target archs and cache");
  add_cache_dir_option(sub, *cache_dir);
  sub->callback([cache_dir] { run_info(*cache_dir); });
}

}  // namespace attnjit::cli

// attnjit cache pack OUT / cache unpack IN: move a prewarmed cache to other
// machines. Pack on the machine that prewarmed; unpack on each fleet machine,
// which can then run with ATTNJIT_CACHE_MODE=require (and a read-only folder).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "attnjit/runtime.hpp"
#include "cache/archive.hpp"
#include "cache_pack.hpp"
#include "common.hpp"

namespace attnjit::cli {
namespace {

struct PackOptions {
  std::string cache_dir, path, arch;
};

std::string entries(size_t n) { return fmt::format("{} entr{}", n, n == 1 ? "y" : "ies"); }

void run_pack(const PackOptions& o) {
  const Config config = load_config(o.cache_dir);
  const auto r = cache::archive::pack(config.cache.dir, o.path, o.arch);
  for (const auto& p : r.problems) fmt::print("left out (corrupt): {}\n", p);
  fmt::print("packed {} ({}) from {} into {}{}\n", entries(r.manifest.entries), format_bytes(r.manifest.bytes),
             config.cache.dir, o.path, r.skipped ? fmt::format("; {} left out as corrupt", entries(r.skipped)) : "");
  if (r.manifest.entries == 0)
    fmt::print(stderr, "warning: the archive holds no entries: prewarm first (attnjit prewarm --model NAME)\n");
}

// What this machine would compile with, for the manifest comparison. NVRTC
// or a GPU may be missing here (a fleet machine in mode require needs
// neither to load entries): then that part is not compared.
cache::archive::LocalVersions local_versions(const Config& config) {
  Config quiet = config;
  quiet.cache.mode = CacheMode::Off;  // info() only; never touch the folder
  const RuntimeInfo info = Runtime(quiet).info();
  cache::archive::LocalVersions local;
  local.attnjit = info.version;
  local.nvrtc = info.nvrtc_version;
  for (const auto& d : info.devices) local.archs.push_back(d.arch);
  if (local.nvrtc.empty())
    fmt::print(stderr, "note: NVRTC does not load here ({}): NVRTC versions not compared\n", info.nvrtc_error);
  return local;
}

void run_unpack(const PackOptions& o) {
  Config config = load_config(o.cache_dir);
  if (config.cache.mode == CacheMode::ReadOnly || config.cache.mode == CacheMode::Off)
    throw Error(Status::InvalidArgument,
                fmt::format("ATTNJIT_CACHE_MODE={} does not let unpack write {}; allowed here: readwrite, require",
                            to_string(config.cache.mode), config.cache.dir));
  cache::DiskCache into(config.cache);
  const auto r = cache::archive::unpack(o.path, into, local_versions(config));
  for (const auto& w : r.warnings) fmt::print(stderr, "warning: {}\n", w);
  for (const auto& p : r.problems) fmt::print("refused: {}\n", p);
  fmt::print("unpacked {} into {}: {} installed, {} already present, {} refused\n", o.path, config.cache.dir,
             r.installed, r.present, r.refused);
  if (r.refused > 0) {
    fmt::print(stderr, "{} member{} of the archive {} refused and not installed\n", r.refused,
               r.refused == 1 ? "" : "s", r.refused == 1 ? "was" : "were");
    throw CLI::RuntimeError(1);
  }
}

}  // namespace

void register_cache_pack(CLI::App* cache) {
  {
    auto o = std::make_shared<PackOptions>();
    CLI::App* sub = cache->add_subcommand(
        "pack", "Pack every verified entry into a tar archive (.tar.zst, .tar.gz or .tar) for other machines");
    add_cache_dir_option(sub, o->cache_dir);
    sub->add_option("OUT", o->path, "Archive to write, e.g. llama-sm_90a.tar.zst")->required();
    sub->add_option("--arch", o->arch, "Only entries for this arch, e.g. sm_90a")
        ->check(not_empty("give an arch such as sm_90a, or leave --arch out for every arch"));
    sub->callback([o] { run_pack(*o); });
  }
  {
    auto o = std::make_shared<PackOptions>();
    CLI::App* sub = cache->add_subcommand(
        "unpack", "Verify and install the entries of an archive made by `cache pack`; exit 1 if any is refused");
    add_cache_dir_option(sub, o->cache_dir);
    sub->add_option("IN", o->path, "Archive to read")->required()->check(CLI::ExistingFile);
    sub->callback([o] { run_unpack(*o); });
  }
}

}  // namespace attnjit::cli

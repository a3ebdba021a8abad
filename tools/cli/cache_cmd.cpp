// attnjit cache ls|verify|clear|gc|stats: maintenance of the on-disk kernel cache.
// Non-interactive (scripts and fleet tooling run these). ls, stats and a
// plain verify only read (they never even create the folder). clear, gc and
// verify --remove follow ATTNJIT_CACHE_MODE: readonly changes nothing; "off"
// is read as readonly here, since naming the command is asking about the folder.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "attnjit/error.hpp"
#include "cache/disk_cache.hpp"
#include "cache/write_probe.hpp"
#include "cache_pack.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attnjit::cli {
namespace {

struct CacheOptions {
  std::string cache_dir, max_bytes, arch;
  bool remove = false;
  bool json = false;
};

enum class Access { Read, Change };

cache::DiskCache open_cache(const CacheOptions& o, Access access) {
  Config config = load_config(o.cache_dir);
  if (access == Access::Read || config.cache.mode == CacheMode::Off) config.cache.mode = CacheMode::ReadOnly;
  return cache::DiskCache(config.cache);
}

// Names the mode the user set (off is run as readonly here, see above).
void note_if_readonly(const CacheOptions& o, const cache::DiskCache& c, const char* what) {
  if (c.config().mode == CacheMode::ReadOnly)
    fmt::print(stderr, "note: cache mode is {} (ATTNJIT_CACHE_MODE): {} nothing\n",
               to_string(load_config(o.cache_dir).cache.mode), what);
}

// A missing folder is an empty cache, but say so: it is often a mistyped path.
void note_if_missing(const cache::DiskCache& c) {
  std::error_code ec;
  if (!std::filesystem::exists(c.config().dir, ec) && !ec)
    fmt::print(stderr, "note: the cache folder {} does not exist (nothing is cached there yet)\n", c.config().dir);
}

std::string entry_name(const cache::EntryInfo& e) {
  if (e.metadata.is_object()) {
    if (auto it = e.metadata.find("name"); it != e.metadata.end() && it->is_string()) return it->get<std::string>();
    if (auto it = e.metadata.find("spec"); it != e.metadata.end()) return it->dump();
  }
  return "(header unreadable: run `attnjit cache verify`)";
}

void run_ls(const CacheOptions& o) {
  auto c = open_cache(o, Access::Read);
  auto entries = c.list();
  note_if_missing(c);
  if (!o.arch.empty())
    entries.erase(std::remove_if(entries.begin(), entries.end(), [&](const auto& e) { return e.arch != o.arch; }),
                  entries.end());
  uint64_t total = 0;
  if (!entries.empty())
    fmt::print("{:<8} {:<16} {:>10}  {:<19}  {}\n", "arch", "key", "size", "last used", "kernel");
  for (const auto& e : entries) {
    total += e.bytes;
    fmt::print("{:<8} {:<16} {:>10}  {:<19}  {}\n", e.arch, e.key.substr(0, 16), format_bytes(e.bytes),
               format_local_time(e.last_used), entry_name(e));
  }
  fmt::print("{} entr{}, {} in {}\n", entries.size(), entries.size() == 1 ? "y" : "ies", format_bytes(total),
             c.config().dir);
}

// Temporaries are not corruption, but a kill mid-publish leaves them: show them.
void print_temporaries(const std::vector<cache::TemporaryInfo>& temps) {
  for (const auto& t : temps)
    fmt::print("temporary: {} ({}, {} s old, writer {})\n", t.path.string(), format_bytes(t.bytes), t.age.count(),
               t.writer);
  if (!temps.empty())
    fmt::print(stderr, "note: {} temporary file{} of unfinished writes; `attnjit cache gc` removes those whose "
                       "writer is gone (this host) or that are older than {} s\n",
               temps.size(), temps.size() == 1 ? "" : "s", cache::DiskCache::kStaleTemporaryAge.count());
}

void run_verify(const CacheOptions& o) {
  auto c = open_cache(o, o.remove ? Access::Change : Access::Read);
  if (o.remove) note_if_readonly(o, c, "removes");
  const cache::VerifyReport r = c.verify(o.remove);
  note_if_missing(c);
  for (const auto& p : r.problems) fmt::print("corrupt: {}\n", p);
  print_temporaries(r.temporaries);
  fmt::print("verify {}: {} ok, {} corrupt{}, {} temporar{}\n", c.config().dir, r.ok, r.corrupt,
             o.remove ? fmt::format(", {} removed", r.removed) : std::string(), r.temporaries.size(),
             r.temporaries.size() == 1 ? "y" : "ies");
  if (r.corrupt > 0) {
    if (!o.remove) fmt::print(stderr, "run `attnjit cache verify --remove` to delete the corrupt entries\n");
    throw CLI::RuntimeError(1);
  }
}

void run_clear(const CacheOptions& o) {
  auto c = open_cache(o, Access::Change);
  note_if_readonly(o, c, "removes");
  const size_t removed = c.clear();
  fmt::print("removed {} entr{} from {}\n", removed, removed == 1 ? "y" : "ies", c.config().dir);
}

void run_gc(const CacheOptions& o) {
  auto c = open_cache(o, Access::Change);
  note_if_readonly(o, c, "evicts");
  std::optional<uint64_t> cap;
  if (!o.max_bytes.empty()) cap = parse_byte_count(o.max_bytes, "--max-bytes");
  const cache::GcReport r = c.gc(cap);
  fmt::print("gc {}: evicted {} entr{}, reaped {} temporar{}: {} -> {} (cap {})\n", c.config().dir, r.evicted,
             r.evicted == 1 ? "y" : "ies", r.temporaries_reaped, r.temporaries_reaped == 1 ? "y" : "ies",
             format_bytes(r.bytes_before), format_bytes(r.bytes_after), format_bytes(cap.value_or(c.config().max_bytes)));
}

void run_stats(const CacheOptions& o) {
  const Config config = load_config(o.cache_dir);
  const cache::Stats s = open_cache(o, Access::Read).stats();
  // Whether the library would write here: its mode, then a real write
  // (permission bits do not tell about ACLs, read-only mounts or a full disk).
  std::string writable = fmt::format("no: cache mode {} does not write", to_string(config.cache.mode));
  if (config.cache.mode == CacheMode::ReadWrite || config.cache.mode == CacheMode::Require)
    writable = cache::describe(cache::probe_writable(config.cache.dir));
  if (o.json) return print_stats_json(config, s, writable);
  fmt::print("dir:      {}\n", s.dir);
  fmt::print("mode:     {}\n", to_string(config.cache.mode));
  fmt::print("entries:  {}\n", s.entries);
  fmt::print("bytes:    {} ({})\n", s.bytes, format_bytes(s.bytes));
  fmt::print("cap:      {} ({})\n", s.max_bytes, format_bytes(s.max_bytes));
  fmt::print("writable: {}\n", writable);
  uint64_t temp_bytes = 0;
  for (const auto& t : s.temporaries) temp_bytes += t.bytes;
  fmt::print("temporaries: {} ({})\n", s.temporaries.size(), format_bytes(temp_bytes));
  print_temporaries(s.temporaries);
}

}  // namespace

void register_cache(CLI::App& app) {
  CLI::App* cache = app.add_subcommand("cache", "Inspect and maintain the on-disk kernel cache");
  cache->require_subcommand(1);
  auto add = [&](const char* name, const char* help, void (*fn)(const CacheOptions&)) {
    auto o = std::make_shared<CacheOptions>();
    CLI::App* sub = cache->add_subcommand(name, help);
    add_cache_dir_option(sub, o->cache_dir);
    sub->callback([o, fn] { fn(*o); });
    return std::make_pair(sub, o);
  };
  {
    auto [sub, o] = add("ls", "One line per entry: arch, key prefix, size, last used, kernel name", run_ls);
    sub->add_option("--arch", o->arch, "Only entries for this arch, e.g. sm_90a")
        ->check(not_empty("give an arch such as sm_90a, or leave --arch out for every arch"));
  }
  {
    auto [sub, o] = add("verify", "Check every entry's header and payload hash; exit 1 if any is corrupt", run_verify);
    sub->add_flag("--remove", o->remove, "Delete the corrupt entries (still exits 1 when some were found)");
  }
  add("clear", "Remove every entry (no confirmation asked)", run_clear);
  {
    auto [sub, o] = add("gc", "Reap stale temporary files and evict least-recently-used entries down to the cap", run_gc);
    sub->add_option("--max-bytes", o->max_bytes,
                    "Cap, e.g. 2G or 512M (default: ATTNJIT_CACHE_MAX_BYTES, else 4 GiB)")
        ->check(not_empty("give a size such as 2G, or leave --max-bytes out for ATTNJIT_CACHE_MAX_BYTES"));
  }
  {
    auto [sub, o] = add("stats", "Folder, mode, entry count, bytes, cap and whether it is writable", run_stats);
    sub->add_flag("--json", o->json, "One JSON object instead of text");
  }
  register_cache_pack(cache);
}

}  // namespace attnjit::cli

// attnjit prewarm: compile every kernel a model (or a manifest) needs into the
// disk cache, so serving processes load cubins instead of compiling them.
// Needs NVRTC, not a GPU: --arch names the target.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "attnjit/error.hpp"
#include "attnjit/introspection.hpp"
#include "attnjit/runtime.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "ops/registry.hpp"
#include "presets.hpp"
#include "prewarm_report.hpp"
#include "variant_file.hpp"

namespace attnjit::cli {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct PrewarmOptions {
  std::string model, manifest, arch, cache_dir, variant;
  unsigned jobs = 0;
  bool list_models = false;
  bool allow_memory_only = false;
};

struct KernelList {
  std::string label;  // the model name or the manifest's file name
  std::string arch;   // from the manifest, if it names one
  std::vector<KernelSpec> specs;
  std::vector<std::string> notes;  // problems skipped, and why
};

// ---- manifest ---------------------------------------------------------------

[[noreturn]] void manifest_error(const std::string& file, const std::string& where, const std::string& what) {
  throw Error(Status::InvalidArgument, fmt::format("manifest {}: {}: {}", file, where.empty() ? "/" : where, what));
}

void reject_unknown_keys(const json& obj, const std::set<std::string>& allowed, const std::string& file,
                         const std::string& where) {
  for (const auto& item : obj.items())
    if (!allowed.count(item.key()))
      manifest_error(file, where + "/" + item.key(),
                     fmt::format("unknown key; allowed: {}", fmt::join(allowed, ", ")));
}

const char* json_kind(const json& j) { return j.type_name(); }

std::string get_string(const json& obj, const char* key, const std::string& fallback, const std::string& file,
                       const std::string& where) {
  if (!obj.contains(key)) {
    if (fallback.empty()) manifest_error(file, where, fmt::format("missing \"{}\" (a string)", key));
    return fallback;
  }
  const json& v = obj.at(key);
  if (!v.is_string())
    manifest_error(file, where + "/" + key, fmt::format("expected a string, got {} {}", json_kind(v), v.dump()));
  return v.get<std::string>();
}

// Runs f; an attnjit::Error from it is re-thrown with the file and JSON path in front.
template <typename F>
auto at_path(const std::string& file, const std::string& where, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("manifest {}: {}: {}", file, where, e.what()));
  }
}

// fn(where, entry) for each entry of the manifest's list doc[key] (where: its
// JSON pointer); a list that is not one, or an entry not an object, is an error.
template <class F>
void for_each_entry(const json& doc, const char* key, const char* entry_kind, const std::string& file, F&& fn) {
  const json& list = doc.at(key);
  const std::string path = std::string("/") + key;
  if (!list.is_array()) manifest_error(file, path, fmt::format("expected a list, got {}", json_kind(list)));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = fmt::format("{}/{}", path, i);
    if (!list[i].is_object())
      manifest_error(file, where, fmt::format("expected {}, got {}", entry_kind, json_kind(list[i])));
    fn(where, list[i]);
  }
}

KernelList read_manifest(const std::string& file, const nlohmann::json* variant) {
  std::ifstream in(file);
  if (!in)
    throw Error(Status::InvalidArgument, fmt::format("--manifest='{}' cannot be opened: {}", file, std::strerror(errno)));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    throw Error(Status::InvalidArgument, fmt::format("manifest {} is not valid JSON: {}", file, e.what()));
  }
  if (!doc.is_object())
    manifest_error(file, "", fmt::format("expected an object with \"kernels\" and/or \"problems\", got {}",
                                         json_kind(doc)));
  reject_unknown_keys(doc, {"arch", "kernels", "problems"}, file, "");
  if (!doc.contains("kernels") && !doc.contains("problems"))
    manifest_error(file, "", "needs \"kernels\" (a list of kernel specs) and/or \"problems\" (a list of problems, "
                             "each with \"op\": one of " + ops::operator_names() + ")");

  KernelList list;
  list.label = std::filesystem::path(file).filename().string();
  if (doc.contains("arch")) list.arch = get_string(doc, "arch", "", file, "");

  std::vector<KernelSpec> specs;
  if (doc.contains("kernels"))
    for_each_entry(doc, "kernels", "a kernel spec object", file, [&](const std::string& where, const json& entry) {
      // from_json validates every field and rejects keys the family does not have.
      KernelSpec spec = at_path(file, where, [&] { return KernelSpec::from_json(entry); });
      at_path(file, where, [&] {
        for (const auto& item : entry.items())
          if (!spec.to_json().contains(item.key()))
            throw Error(Status::InvalidArgument,
                        fmt::format("\"{}\" is not a field of a {} kernel spec", item.key(), spec.family_name()));
        return 0;
      });
      specs.push_back(std::move(spec));
    });
  if (doc.contains("problems"))
    for_each_entry(doc, "problems", "an object", file, [&](const std::string& where, const json& entry) {
      // A problem without "op" is a single decode (the manifests of 0.1).
      json problem = entry;
      if (!problem.contains("op")) problem["op"] = "single_decode";
      if (!problem["op"].is_string())
        manifest_error(file, where + "/op", fmt::format("expected a string, got {}", problem["op"].dump()));
      if (variant) add_variant(problem, *variant);
      const auto& op = at_path(file, where + "/op", [&]() -> const ops::OperatorEntry& {
        return ops::find_operator(problem["op"].get<std::string>());
      });
      for (auto& s : at_path(file, where, [&] { return op.kernels_for(problem); })) specs.push_back(s);
    });
  list.specs = dedupe_by_name(specs);
  return list;
}

KernelList kernels_for_model(const std::string& name, const nlohmann::json* variant) {
  const ModelPreset& m = find_preset(name);
  KernelList list;
  list.label = m.name;
  std::vector<KernelSpec> specs;
  for (const auto& op : ops::operators())
    for (auto problem : op.model_problems(model_shape(m))) {
      if (variant) add_variant(problem, *variant);
      try {
        for (auto& s : op.kernels_for(problem)) specs.push_back(s);
      } catch (const Error& e) {
        if (e.status() != Status::Unsupported) throw;
        list.notes.push_back(fmt::format("skipped {}: {}", problem.dump(), e.what()));
      }
    }
  list.specs = dedupe_by_name(specs);
  return list;
}

void print_models() {
  fmt::print("{:<16} {:>8} {:>8} {:>8} {:>9} {:>8}  {}\n", "model", "q_heads", "kv_heads", "head_dim", "dtype",
             "soft_cap", "source");
  for (const auto& m : model_presets())
    fmt::print("{:<16} {:>8} {:>8} {:>8} {:>9} {:>8}  {}\n", m.name, m.num_qo_heads, m.num_kv_heads, m.head_dim,
               to_string(m.dtype), m.logits_soft_cap > 0 ? fmt::format("{:g}", m.logits_soft_cap) : "-", m.source);
}

// ---- the work ---------------------------------------------------------------

using Outcome = PrewarmOutcome;

// One progress line per finished kernel: rewritten in place on a terminal,
// one line each otherwise (logs, pipes).
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(stderr_is_terminal()) {}
  void report(const char* what, const std::string& name, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++done_;
    const int width = static_cast<int>(std::to_string(total_).size());
    fmt::print(stderr, "{}[{:>{}}/{}] {} {} {:.2f} s{}", tty_ ? "\r\033[K" : "", done_, width, total_, what, name,
               seconds, tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  void finish() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tty_ && done_ > 0) fmt::print(stderr, "\n");
  }

 private:
  std::mutex mutex_;
  size_t total_, done_ = 0;
  bool tty_;
};

void run_prewarm(const PrewarmOptions& o) {
  if (o.list_models) {
    print_models();
    return;
  }
  if (o.model.empty() == o.manifest.empty())
    throw Error(Status::InvalidArgument,
                fmt::format("prewarm needs exactly one of --model NAME (known: {}) or --manifest FILE.json",
                            preset_names()));
  const nlohmann::json variant = o.variant.empty() ? nlohmann::json() : read_variant_file(o.variant);
  const nlohmann::json* v = o.variant.empty() ? nullptr : &variant;
  KernelList list = o.model.empty() ? read_manifest(o.manifest, v) : kernels_for_model(o.model, v);
  for (const auto& note : list.notes) fmt::print(stderr, "note: {}\n", note);

  // The arch is checked before the cache folder is created or anything compiles.
  if (!o.arch.empty()) introspect::check_arch(o.arch, "--arch");
  else if (!list.arch.empty()) introspect::check_arch(list.arch, fmt::format("manifest {}: /arch", o.manifest));
  Config config = load_config(o.cache_dir);
  if (config.cache.mode == CacheMode::Require) {
    // Prewarm exists to fill the cache; "fail on miss" is for the fleet that reads it.
    config.cache.mode = CacheMode::ReadWrite;
  }
  const CacheMode mode = config.cache.mode;
  // A folder this user cannot write (a shared cache another user filled)
  // fails only if something needs storing: the run checks each kernel's entry
  // and compiles nothing, since nothing compiled could be kept.
  std::string unwritable = preflight_cache(config.cache, o.allow_memory_only);
  if (o.allow_memory_only) unwritable.clear();
  const bool check_only = !unwritable.empty();
  if (check_only) config.cache.mode = CacheMode::ReadOnly;  // the engine only computes keys: never touch the folder
  Runtime rt(config);
  const std::string arch = !o.arch.empty() ? o.arch : !list.arch.empty() ? list.arch : rt.default_arch();
  // Kernels of an arch-specific backend (Hopper prefill) only where they run.
  const size_t listed = list.specs.size();
  list.specs.erase(std::remove_if(list.specs.begin(), list.specs.end(),
                                  [&](const KernelSpec& s) { return !s.supports_arch(arch); }),
                   list.specs.end());
  if (list.specs.size() < listed)
    fmt::print(stderr, "note: skipped {} kernel(s) that do not run on {}\n", listed - list.specs.size(), arch);

  const size_t n = list.specs.size();
  std::vector<Outcome> outcomes(n);
  unsigned jobs = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(n, 1)));

  Progress progress(n);
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  const auto start = Clock::now();
  auto worker = [&]() {
    for (size_t i; !stop && (i = next++) < n;) {
      const auto t0 = Clock::now();
      Outcome& out = outcomes[i];
      try {
        if (check_only) {
          list.specs[i].validate();
          out.key = introspect::cache_key(rt, list.specs[i], arch);
          out.entry_path = introspect::cache_entry_path(rt, arch, out.key);
          out.kind = entry_is_stored(out.entry_path, arch, out.key) ? Outcome::Cached : Outcome::NotCached;
        } else {
          introspect::PreparedKernel p = introspect::prepare(rt, list.specs[i], arch);
          out.kind = p.origin == introspect::Origin::Compiled ? Outcome::Compiled : Outcome::Cached;
          out.key = std::move(p.key);
          out.entry_path = introspect::cache_entry_path(rt, arch, out.key);
        }
      } catch (const std::exception& e) {
        out.kind = Outcome::Failed;
        out.error = e.what();
        // A bad request (typically --arch) fails every kernel alike: stop taking more.
        if (const auto* err = dynamic_cast<const Error*>(&e); err && err->status() == Status::InvalidArgument)
          stop = true;
      }
      out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      progress.report(out.kind == Outcome::Compiled    ? "compiled"
                      : out.kind == Outcome::Cached    ? "cached  "
                      : out.kind == Outcome::NotCached ? "missing "
                                                       : "FAILED  ",
                      list.specs[i].name(), out.seconds);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < jobs; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  progress.finish();
  const double total = std::chrono::duration<double>(Clock::now() - start).count();

  PrewarmRun run{list.label, arch, {}, std::move(outcomes), total, o.allow_memory_only, mode, unwritable};
  for (const auto& spec : list.specs) run.names.push_back(spec.name());
  report_prewarm(run, config.cache, introspect::cache_not_writable_reason(rt));
}

}  // namespace

void register_prewarm(CLI::App& app) {
  auto o = std::make_shared<PrewarmOptions>();
  CLI::App* sub = app.add_subcommand(
      "prewarm",
      "Compile every kernel a model or a manifest needs into the disk cache (NVRTC only; no GPU needed). "
      "ATTNJIT_CACHE_MODE=require is treated as readwrite here.");
  auto* model = sub->add_option("--model", o->model, "Model preset (see --list-models): " + preset_names())
                    ->check(not_empty("give a model preset: " + preset_names()));
  auto* manifest = sub->add_option("--manifest", o->manifest,
                                   "JSON file: {\"arch\": optional, \"kernels\": [kernel spec, ...]} and/or "
                                   "{\"problems\": [{\"op\": \"single_decode\", \"num_qo_heads\", \"num_kv_heads\", "
                                   "\"head_dim\", \"q_dtype\", \"kv_dtype\", ...}, ...]} (see `attnjit explain --list-ops`)")
                      ->check(not_empty("give a manifest file"));
  model->excludes(manifest);
  sub->add_option("--arch", o->arch,
                  "Target arch, e.g. sm_90a or sm_80 (default: the manifest's, else the first GPU's, else sm_90a)")
      ->check(not_empty("give an arch such as sm_90a, or leave --arch out for the manifest's or the GPU's"));
  sub->add_option("-j,--jobs", o->jobs, "Parallel compiles (default: the number of hardware threads)")
      ->check(CLI::Range(1u, 1024u));
  add_cache_dir_option(sub, o->cache_dir);
  sub->add_option("--variant", o->variant,
                  "JSON file of a user variant, {\"score_mod\": body, \"mask_mod\": body, \"params\": [{\"name\", "
                  "\"type\", \"rank\"}]}: the attention problems' kernels are compiled with it (a mask_mod "
                  "replaces causal)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--list-models", o->list_models, "Print the model presets and exit");
  sub->add_flag("--allow-memory-only", o->allow_memory_only,
                "Exit 0 even when compiled kernels cannot be stored in the cache (a compile check); by default "
                "prewarm fails (exit 1) when it could not store what it compiled");
  sub->callback([o] { run_prewarm(*o); });
}

}  // namespace attnjit::cli

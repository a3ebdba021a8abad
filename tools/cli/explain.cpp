// attnjit explain: for a decode problem (or a model preset), which kernels it
// needs, their specs, cache keys and cache paths, whether each is cached, and
// optionally the generated source. Needs NVRTC for the key (its version is
// hashed in), never a GPU.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>

#include "attnjit/error.hpp"
#include "attnjit/introspection.hpp"
#include "attnjit/runtime.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "ops/registry.hpp"
#include "presets.hpp"
#include "variant_file.hpp"

namespace attnjit::cli {
namespace {

namespace fs = std::filesystem;

struct ExplainOptions {
  std::string op = "single_decode", problem, model, q_dtype, kv_dtype, pos_encoding = "NONE", arch, cache_dir,
      variant;
  int head_dim = 0, num_qo_heads = 0, num_kv_heads = 0;
  float soft_cap = 0;
  int64_t kv_len = 0;  // 0: not given (show every kernel the problem may use)
  bool source = false, list_ops = false;
};

// The problem's JSON form: --problem as given, else built from the decode
// flags (--model or the head shape). The operator validates it.
nlohmann::json make_problem(const ExplainOptions& o) {
  if (!o.problem.empty()) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(o.problem);
    } catch (const nlohmann::json::parse_error& e) {
      throw Error(Status::InvalidArgument, fmt::format("--problem is not valid JSON: {}", e.what()));
    }
    if (!j.is_object()) throw Error(Status::InvalidArgument, fmt::format("--problem={} must be a JSON object", o.problem));
    if (!j.contains("op")) j["op"] = o.op;
    if (o.kv_len > 0) j["kv_len"] = o.kv_len;
    return j;
  }
  nlohmann::json j = {{"op", o.op}};
  std::string default_dtype = "bfloat16";
  if (!o.model.empty()) {
    const ModelPreset& m = find_preset(o.model);
    j["num_qo_heads"] = m.num_qo_heads;
    j["num_kv_heads"] = m.num_kv_heads;
    j["head_dim"] = m.head_dim;
    if (m.logits_soft_cap > 0) j["logits_soft_cap"] = m.logits_soft_cap;
    default_dtype = to_string(m.dtype);
  } else {
    if (o.num_qo_heads == 0 || o.num_kv_heads == 0 || o.head_dim == 0)
      throw Error(Status::InvalidArgument,
                  fmt::format("explain needs --problem JSON, --model NAME (known: {}) or all of --num-qo-heads, "
                              "--num-kv-heads and --head-dim",
                              preset_names()));
    j["num_qo_heads"] = o.num_qo_heads;
    j["num_kv_heads"] = o.num_kv_heads;
    j["head_dim"] = o.head_dim;
    if (o.soft_cap != 0) j["logits_soft_cap"] = o.soft_cap;
  }
  j["q_dtype"] = to_string(parse_dtype(o.q_dtype.empty() ? default_dtype : o.q_dtype, "--q-dtype"));
  if (!o.kv_dtype.empty()) j["kv_dtype"] = to_string(parse_dtype(o.kv_dtype, "--kv-dtype"));
  j["pos_encoding_mode"] = to_string(parse_pos_encoding(o.pos_encoding, "--pos-encoding"));
  if (o.kv_len < 0) throw Error(Status::InvalidArgument, fmt::format("--kv-len={} must be >= 1", o.kv_len));
  if (o.kv_len > 0) j["kv_len"] = o.kv_len;
  return j;
}

void list_ops() {
  for (const auto& op : ops::operators()) fmt::print("{:<16} {}\n", op.name, op.summary);
}

void run_explain(const ExplainOptions& o) {
  if (o.list_ops) return list_ops();
  nlohmann::json problem = make_problem(o);
  if (!o.variant.empty() && !add_variant(problem, read_variant_file(o.variant)))
    throw Error(Status::InvalidArgument, fmt::format("--variant: operator '{}' takes no variant; allowed with "
                                                     "single_decode, batch_decode, single_prefill, batch_prefill",
                                                     problem.value("op", "")));
  const ops::OperatorEntry& op = ops::find_operator(problem.at("op").get<std::string>());
  std::vector<KernelSpec> specs = op.kernels_for(problem);  // validates before anything else happens
  if (!o.arch.empty()) introspect::check_arch(o.arch, "--arch");
  const Config config = load_config(o.cache_dir);
  Config read_only = config;  // explain only looks: never create the folder
  if (read_only.cache.mode != CacheMode::Off) read_only.cache.mode = CacheMode::ReadOnly;
  Runtime rt(read_only);
  const bool have_gpu = introspect::gpu_present();
  const std::string arch = !o.arch.empty() ? o.arch : rt.default_arch();

  fmt::print("problem: {}{}\n", problem.dump(), o.model.empty() ? std::string() : fmt::format(" (model {})", o.model));
  fmt::print("arch:    {}{}\n", arch,
             !o.arch.empty() ? "" : have_gpu ? " (device 0)" : " (default: no GPU found)");

  if (o.kv_len > 0 || problem.contains("kv_len") || problem.contains("kv_lens")) {
    ops::DeviceFigures figures;
    figures.arch = arch;
    figures.persistent_prefill = config.persistent_prefill;  // as the runtime would plan it
    if (have_gpu) {
      const introspect::DeviceLimits limits = introspect::device_limits(rt, 0);
      figures.sm_count = limits.sm_count;
      figures.smem_per_block = limits.smem_per_block;
    }
    const nlohmann::json plan = op.explain(problem, figures);
    fmt::print("plan:    for {} SMs{}\n", figures.sm_count, have_gpu ? " (device 0)" : " (assumed: no GPU)");
    for (const auto& item : plan.items())
      if (item.key() != "kernels" && item.key() != "problem")
        fmt::print("  {}: {}\n", item.key(), item.value().dump());
    specs.clear();
    for (const auto& k : plan.at("kernels")) {
      fmt::print("  {} {}: grid {} x {} threads, {} B shared memory\n", k.at("role").get<std::string>(),
                 k.at("kernel").get<std::string>(), k.at("grid").dump(), k.at("threads").get<int>(),
                 k.at("smem_bytes").get<int>());
      specs.push_back(KernelSpec::from_json(k.at("spec")));
    }
  } else {
    fmt::print("kernels: every one the problem can use (some run only for some lengths; give --kv-len to see "
               "the plan)\n");
  }

  std::string nvrtc_problem;
  try {
    fmt::print("nvrtc:   {}\n", introspect::nvrtc_facts(rt).version);
  } catch (const Error& e) {
    nvrtc_problem = e.what();
    fmt::print("nvrtc:   unavailable, so no cache key: {}\n", nvrtc_problem);
  }
  fmt::print("cache:   {} ({})\n", config.cache.dir, to_string(config.cache.mode));

  for (size_t i = 0; i < specs.size(); ++i) {
    const KernelSpec& s = specs[i];
    fmt::print("\n[{}/{}] {}\n", i + 1, specs.size(), s.name());
    fmt::print("  spec:   {}\n", s.to_json().dump());
    fmt::print("  entry:  {} ({} threads, {} B dynamic shared memory)\n", s.entry_name(), s.threads(),
               s.dynamic_smem_bytes());
    if (nvrtc_problem.empty()) {
      const std::string key = introspect::cache_key(rt, s, arch);
      const fs::path path = introspect::cache_entry_path(rt, arch, key);
      std::error_code ec;
      const auto bytes = fs::file_size(path, ec);
      fmt::print("  key:    {}\n", key);
      fmt::print("  path:   {}\n", path.string());
      fmt::print("  cached: {}\n", ec ? std::string("no") : fmt::format("yes ({})", format_bytes(bytes)));
    }
    if (o.source) {
      const introspect::GeneratedSource tu = introspect::generated_source(s);
      fmt::print("  source: {} ({} bytes; includes only embedded headers from kernels/)\n", tu.name, tu.source.size());
      fmt::print("----- begin {} -----\n{}{}----- end {} -----\n", tu.name, tu.source,
                 !tu.source.empty() && tu.source.back() == '\n' ? "" : "\n", tu.name);
    }
  }
}

}  // namespace

void register_explain(CLI::App& app) {
  auto o = std::make_shared<ExplainOptions>();
  CLI::App* sub = app.add_subcommand(
      "explain", "Show the kernels a problem needs: spec, cache key, cache path, cached or not (no GPU needed)");
  sub->add_option("--op", o->op, "Operator (see --list-ops)")->capture_default_str();
  sub->add_option("--problem", o->problem, "The problem as JSON (the manifest form), instead of the decode flags");
  sub->add_flag("--list-ops", o->list_ops, "List the operators and exit");
  sub->add_option("--variant", o->variant,
                  "JSON file of a user variant ({\"score_mod\", \"mask_mod\", \"params\"}) added to the problem")
      ->check(CLI::ExistingFile);
  auto* model = sub->add_option("--model", o->model, "Model preset for the head shape and soft cap: " + preset_names());
  auto* hd = sub->add_option("--head-dim", o->head_dim, "Head dimension (64, 128 or 256)");
  auto* qo = sub->add_option("--num-qo-heads", o->num_qo_heads, "Query/output heads");
  auto* kv = sub->add_option("--num-kv-heads", o->num_kv_heads, "KV heads");
  auto* cap = sub->add_option("--soft-cap", o->soft_cap, "Logits soft cap (0: none)");
  for (auto* opt : {hd, qo, kv, cap}) model->excludes(opt);
  sub->add_option("--q-dtype", o->q_dtype, "float16 or bfloat16 (default: the model's, else bfloat16)");
  sub->add_option("--kv-dtype", o->kv_dtype, "KV dtype: the q dtype, float8_e4m3fn or float8_e5m2 (default: q's)");
  sub->add_option("--pos-encoding", o->pos_encoding, "NONE, ROPE_LLAMA or ALIBI")->capture_default_str();
  sub->add_option("--kv-len", o->kv_len, "KV length: also show the plan (splits, grid, workspace) for it");
  // Empty would otherwise read as "not given" and explain for the default arch.
  sub->add_option("--arch", o->arch, "Target arch (default: the first GPU's, else sm_90a)")
      ->check(not_empty(fmt::format("allowed: {}, or leave --arch out for the first GPU's (else sm_90a)",
                                    fmt::join(introspect::known_archs(), ", "))));
  sub->add_flag("--source", o->source, "Also print each generated translation unit");
  add_cache_dir_option(sub, o->cache_dir);
  sub->callback([o] { run_explain(*o); });
}

}  // namespace attnjit::cli

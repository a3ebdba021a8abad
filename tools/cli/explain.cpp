// attnjit explain: for a decode problem (or a model preset), which kernels it
// needs, their specs, cache keys and cache paths, whether each is cached, and
// optionally the generated source. Needs NVRTC for the key (its version is
// hashed in), never a GPU.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "arch.hpp"
#include "attnjit/error.hpp"
#include "attnjit/runtime.hpp"
#include "codegen.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "cuda/driver.hpp"
#include "cuda/nvrtc.hpp"
#include "engine.hpp"
#include "planner/single_decode_planner.hpp"
#include "presets.hpp"

namespace attnjit::cli {
namespace {

namespace fs = std::filesystem;

struct ExplainOptions {
  std::string model, q_dtype, kv_dtype, pos_encoding = "NONE", arch, cache_dir;
  int head_dim = 0, num_qo_heads = 0, num_kv_heads = 0;
  float soft_cap = 0;
  int64_t kv_len = 0;  // 0: not given (show every kernel the problem may use)
  bool source = false;
};

SingleDecodeProblem make_problem(const ExplainOptions& o) {
  SingleDecodeProblem p;
  std::string default_dtype = "bfloat16";
  if (!o.model.empty()) {
    const ModelPreset& m = find_preset(o.model);
    p.num_qo_heads = m.num_qo_heads;
    p.num_kv_heads = m.num_kv_heads;
    p.head_dim = m.head_dim;
    if (m.logits_soft_cap > 0) p.options.logits_soft_cap = m.logits_soft_cap;
    default_dtype = to_string(m.dtype);
  } else {
    if (o.num_qo_heads == 0 || o.num_kv_heads == 0 || o.head_dim == 0)
      throw Error(Status::InvalidArgument,
                  fmt::format("explain needs --model NAME (known: {}) or all of --num-qo-heads, --num-kv-heads and "
                              "--head-dim",
                              preset_names()));
    p.num_qo_heads = o.num_qo_heads;
    p.num_kv_heads = o.num_kv_heads;
    p.head_dim = o.head_dim;
    if (o.soft_cap != 0) p.options.logits_soft_cap = o.soft_cap;
  }
  p.q_dtype = parse_dtype(o.q_dtype.empty() ? default_dtype : o.q_dtype, "--q-dtype");
  p.kv_dtype = o.kv_dtype.empty() ? p.q_dtype : parse_dtype(o.kv_dtype, "--kv-dtype");
  p.options.pos_encoding_mode = parse_pos_encoding(o.pos_encoding, "--pos-encoding");
  p.kv_len = o.kv_len > 0 ? o.kv_len : 1;
  if (o.kv_len < 0) throw Error(Status::InvalidArgument, fmt::format("--kv-len={} must be >= 1", o.kv_len));
  planner::validate(p);
  return p;
}

void run_explain(const ExplainOptions& o) {
  const SingleDecodeProblem p = make_problem(o);
  if (!o.arch.empty()) check_arch(o.arch, "--arch");
  const Config config = load_config(o.cache_dir);
  Config read_only = config;  // explain only looks: never create the folder
  if (read_only.cache.mode != CacheMode::Off) read_only.cache.mode = CacheMode::ReadOnly;
  Runtime rt(read_only);
  detail::Engine& engine = rt.engine();
  const bool have_gpu = [] {
    if (!cuda::driver_available()) return false;
    int n = 0;
    return cuda::driver().DeviceGetCount(&n) == CUDA_SUCCESS && n > 0;
  }();
  const std::string arch = !o.arch.empty() ? o.arch : rt.default_arch();

  fmt::print("problem: num_qo_heads={} num_kv_heads={} head_dim={} q_dtype={} kv_dtype={} pos_encoding={} "
             "logits_soft_cap={:g}{}{}\n",
             p.num_qo_heads, p.num_kv_heads, p.head_dim, to_string(p.q_dtype), to_string(p.kv_dtype),
             to_string(p.options.pos_encoding_mode), p.options.logits_soft_cap.value_or(0.f),
             o.kv_len > 0 ? fmt::format(" kv_len={}", o.kv_len) : std::string(),
             o.model.empty() ? std::string() : fmt::format(" (model {})", o.model));
  fmt::print("arch:    {}{}\n", arch,
             !o.arch.empty() ? "" : have_gpu ? " (device 0)" : " (default: no GPU found)");

  std::vector<KernelSpec> specs;
  if (o.kv_len > 0) {
    planner::DeviceFigures figures;
    if (have_gpu) figures.sm_count = engine.sm_count(0);
    const planner::SingleDecodeLayout L = planner::plan_single_decode(p, figures);
    fmt::print("plan:    {} KV split{} of {} rows (kv_begin {}) for {} SMs{}; decode grid ({},{},{}) x {} threads, "
               "{} B shared memory",
               L.num_splits, L.num_splits == 1 ? "" : "s", L.chunk_size, L.kv_begin, figures.sm_count,
               have_gpu ? " (device 0)" : " (assumed: no GPU)", L.decode_shape.grid[0], L.decode_shape.grid[1],
               L.decode_shape.grid[2], L.decode_shape.threads, L.decode_shape.smem_bytes);
    if (L.merge)
      fmt::print("; merge grid {} x {} threads; workspace {} B", L.merge_shape.grid[0], L.merge_shape.threads,
                 L.workspace_bytes);
    fmt::print("\n");
    specs.push_back(L.decode);
    if (L.merge) specs.push_back(*L.merge);
  } else {
    specs = planner::kernels_for(p);
    fmt::print("kernels: every one the problem can use (merge_states runs only when the KV is split; "
               "give --kv-len to see the plan)\n");
  }

  std::string nvrtc_problem;
  try {
    fmt::print("nvrtc:   {}\n", cuda::nvrtc_info(rt.config().nvrtc_library).version());
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
      const std::string key = engine.key_for(s, arch);
      const fs::path path = engine.disk_cache().entry_path(arch, key);
      std::error_code ec;
      const auto bytes = fs::file_size(path, ec);
      fmt::print("  key:    {}\n", key);
      fmt::print("  path:   {}\n", path.string());
      fmt::print("  cached: {}\n", ec ? std::string("no") : fmt::format("yes ({})", format_bytes(bytes)));
    }
    if (o.source) {
      const TranslationUnit tu = generate(s);
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
      "explain", "Show the kernels a decode problem needs: spec, cache key, cache path, cached or not (no GPU needed)");
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
  sub->add_option("--arch", o->arch, "Target arch (default: the first GPU's, else sm_90a)");
  sub->add_flag("--source", o->source, "Also print each generated translation unit");
  add_cache_dir_option(sub, o->cache_dir);
  sub->callback([o] { run_explain(*o); });
}

}  // namespace attnjit::cli

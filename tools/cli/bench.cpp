// `attnjit bench`: every operator's standard shapes (from the registry) against
// a device-to-device copy measured in the same run, and the JIT's costs (cold
// compile, disk load, memory hit).
// Timing: CUDA events around batches of launches after warm-up, median of
// many batches; KV inputs rotate across buffers totalling well over the L2.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include "attnjit/attnjit.hpp"
#include "attnjit/introspection.hpp"
#include "commands.hpp"
#include "ops/registry.hpp"
#include "scoped_temp_dir.hpp"

namespace attnjit::cli {
namespace {

struct JitRow {
  double cold_compile_s = 0, disk_load_ms = 0, memory_hit_us = 0;
};

// The heaviest common decode variant: bf16, 32/8 heads, d128 (tensor cores).
KernelSpec jit_probe_spec() {
  return ops::find_operator("single_decode")
      .kernels_for({{"op", "single_decode"}, {"num_qo_heads", 32}, {"num_kv_heads", 8}, {"head_dim", 128},
                    {"q_dtype", "bfloat16"}})[0];
}

// Cold compile into an empty cache, then an in-memory hit loop.
JitRow bench_jit(const std::string& arch, const std::string& cache_dir) {
  Config cfg = Config::from_env();
  cfg.cache.dir = cache_dir;
  Runtime rt(cfg);
  const KernelSpec spec = jit_probe_spec();
  JitRow row;
  auto t0 = std::chrono::steady_clock::now();
  const auto prepared = introspect::prepare(rt, spec, arch);
  row.cold_compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (prepared.origin != introspect::Origin::Compiled) throw Error(Status::Internal, "bench: the cold-compile probe found a cached entry");
  constexpr int kHits = 200000;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kHits; ++i) introspect::prepare(rt, spec, arch);
  row.memory_hit_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kHits;
  return row;
}

// Runs in a fresh process (`attnjit bench --disk-load-probe`): time from a new
// Runtime to the kernel ready from the disk cache (key computed, entry read and
// verified), excluding the driver's own cuInit.
double disk_load_probe_ms(const std::string& arch, const std::string& cache_dir) {
  Config cfg = Config::from_env();
  cfg.cache.dir = cache_dir;
  cfg.cache.mode = CacheMode::Require;  // a miss here would be a bug in the probe
  auto t0 = std::chrono::steady_clock::now();
  Runtime rt(cfg);
  const auto prepared = introspect::prepare(rt, jit_probe_spec(), arch);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (prepared.origin != introspect::Origin::Disk) throw Error(Status::Internal, "bench: disk-load probe did not load from disk");
  return ms;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure decode bandwidth vs a device copy, and JIT costs");
  struct Opts {
    std::string json_out, arch, probe_dir;
    std::string op, problem;
    bool jit_only = false, skip_jit = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--json", o->json_out, "Write results as JSON to this file");
  cmd->add_option("--op", o->op, "Only this operator's shapes (default: every operator)");
  cmd->add_option("--problem", o->problem, "Time this one problem (its JSON form, with \"op\") instead");
  cmd->add_flag("--jit-only", o->jit_only, "Only the JIT timings (no GPU needed)");
  cmd->add_flag("--skip-jit", o->skip_jit, "Skip the JIT timings");
  cmd->add_option("--arch", o->arch, "Arch for the JIT timings (default: local GPU's, else sm_90a)");
  cmd->add_option("--disk-load-probe", o->probe_dir, "(internal) time one disk-cache load in this process")->group("");
  cmd->callback([o] {
    if (!o->arch.empty()) introspect::check_arch(o->arch, "--arch");
    Runtime rt;
    const std::string arch = o->arch.empty() ? rt.default_arch() : o->arch;
    if (!o->probe_dir.empty()) {
      fmt::print("{:.3f}\n", disk_load_probe_ms(arch, o->probe_dir));
      return;
    }
    nlohmann::json out;
    out["arch"] = arch;
    if (!o->jit_only) {
      const introspect::TimingStream stream(0);
      const auto info = rt.info();
      const double copy = stream.copy_bandwidth();
      out["device"] = info.devices.empty() ? "" : info.devices[0].name;
      out["copy_bytes_per_s"] = copy;
      fmt::print("device: {}  copy (read+write): {:.0f} GB/s\n", out["device"].get<std::string>(), copy / 1e9);
      std::vector<nlohmann::json> problems;
      if (!o->problem.empty()) {
        problems.push_back(nlohmann::json::parse(o->problem));
      } else {
        for (const auto& op : ops::operators())
          if (o->op.empty() || o->op == op.name)
            for (auto& p : op.bench_problems()) problems.push_back(p);
        if (problems.empty()) ops::find_operator(o->op);  // names the known operators
      }
      fmt::print("{:>10} {:>8} {:>9} {:>9}  {}\n", "time(us)", "GB/s", "x copy", "TFLOP/s", "problem / plan");
      for (const auto& problem : problems) {
        const auto& op = ops::find_operator(problem.value("op", ""));
        const ops::BenchFigures f = op.bench(rt, problem, 0, stream.get());
        const double bw = f.bytes / (f.microseconds * 1e-6);
        const double tflops = f.flops / (f.microseconds * 1e-6) / 1e12;
        fmt::print("{:>10.1f} {:>8.0f} {:>9.2f} {:>9.1f}  {}\n{:>40}{}\n", f.microseconds, bw / 1e9, bw / copy,
                   tflops, problem.dump(), "", f.plan.dump());
        out["results"].push_back({{"problem", problem}, {"us", f.microseconds}, {"bytes_per_s", bw},
                                  {"ratio_to_copy", bw / copy}, {"tflops", tflops}, {"plan", f.plan}});
      }
    }
    if (!o->skip_jit) {
      const ScopedTempDir scratch("attnjit-bench-");  // removed on every path out, errors included
      const std::string& dir = scratch.path();
      const JitRow j = bench_jit(arch, dir);
      // The disk load runs in a fresh process of this same binary.
      const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
      std::vector<double> loads;
      for (int i = 0; i < 5; ++i) {
        FILE* f = popen(fmt::format("'{}' bench --arch {} --disk-load-probe '{}'", self, arch, dir).c_str(), "r");
        char buf[64] = {};
        if (!f || !fgets(buf, sizeof buf, f)) throw Error(Status::Internal, "bench: disk-load probe failed to run");
        if (pclose(f) != 0) throw Error(Status::Internal, "bench: disk-load probe failed");
        loads.push_back(std::stod(buf));
      }
      std::sort(loads.begin(), loads.end());
      out["jit"] = {{"spec", jit_probe_spec().name()}, {"cold_compile_s", j.cold_compile_s},
                    {"disk_load_fresh_process_ms", loads[loads.size() / 2]}, {"memory_hit_us", j.memory_hit_us}};
      fmt::print("JIT ({} for {}): cold compile {:.3f} s | disk load in a fresh process {:.2f} ms (median of 5) | in-memory hit {:.3f} us\n",
                 jit_probe_spec().name(), arch, j.cold_compile_s, loads[loads.size() / 2], j.memory_hit_us);
    }
    if (!o->json_out.empty()) std::ofstream(o->json_out) << out.dump(2) << "\n";
  });
}

}  // namespace attnjit::cli

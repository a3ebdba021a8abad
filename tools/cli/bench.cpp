// `attnjit bench`: decode bandwidth against a device-to-device copy measured
// in the same run, and the JIT's costs (cold compile, disk load, memory hit).
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

#include "arch.hpp"
#include "scoped_temp_dir.hpp"
#include "attnjit/attnjit.hpp"
#include "commands.hpp"
#include "cuda/driver.hpp"
#include "engine.hpp"
#include "planner/single_decode_planner.hpp"

namespace attnjit::cli {
namespace {

struct DeviceMem {
  CUdeviceptr p = 0;
  explicit DeviceMem(size_t n) { ATTNJIT_CU(cuda::driver().MemAlloc(&p, n)); }
  ~DeviceMem() { cuda::driver().MemFree(p); }
  void* get() const { return reinterpret_cast<void*>(p); }
};

// Fills with random bf16-range bits in [-1, 1) using a tiny kernel-free path:
// random host bytes uploaded in chunks (never zeros: zeros run faster).
void fill_random(CUdeviceptr p, size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> chunk(1 << 22);
  for (auto& x : chunk) x = static_cast<uint16_t>(0x3c00 ^ (rng() & 0x83ff));  // |x| in [0.5, 2), random sign: valid f16 and bf16
  const size_t cbytes = chunk.size() * 2;
  for (size_t off = 0; off < bytes; off += cbytes)
    ATTNJIT_CU(cuda::driver().MemcpyHtoD(p + off, chunk.data(), std::min(cbytes, bytes - off)));
}

template <class F>
double median_us(F&& launch_batch, int batch, int reps, CUstream stream) {
  const auto& cu = cuda::driver();
  CUevent a, b;
  ATTNJIT_CU(cu.EventCreate(&a, 0));
  ATTNJIT_CU(cu.EventCreate(&b, 0));
  for (int i = 0; i < 3; ++i) launch_batch();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    ATTNJIT_CU(cu.EventRecord(a, stream));
    launch_batch();
    ATTNJIT_CU(cu.EventRecord(b, stream));
    ATTNJIT_CU(cu.EventSynchronize(b));
    float ms = 0;
    ATTNJIT_CU(cu.EventElapsedTime(&ms, a, b));
    t.push_back(1000.0 * ms / batch);
  }
  cu.EventDestroy(a);
  cu.EventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Bytes read + written per second by a large device-to-device copy.
double copy_bandwidth(CUstream stream) {
  const size_t n = size_t(1) << 30;
  DeviceMem src(n), dst(n);
  fill_random(src.p, n, 1);
  auto batch = [&] { ATTNJIT_CU(cuda::driver().MemcpyDtoDAsync(dst.p, src.p, n, stream)); };
  const double us = median_us(batch, 1, 20, stream);
  return 2.0 * n / (us * 1e-6);
}

struct DecodeRow {
  int hq, hkv, d;
  bool tensor_cores;
  int64_t kv_len;
  double us, kv_bytes_per_s, ratio;
  int splits;
};

DecodeRow bench_decode(const Runtime& rt, int hq, int hkv, int d, bool tc, int64_t kv_len, double copy_bw,
                       CUstream stream) {
  SingleDecodeProblem p;
  p.options.use_tensor_cores = tc;
  p.num_qo_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = d;
  p.kv_len = kv_len;
  p.q_dtype = p.kv_dtype = DType::BF16;
  SingleDecodePlan plan(rt, p);
  const size_t kv_bytes = size_t(kv_len) * hkv * d * 2;
  // Rotate over enough K/V pairs that one pass touches > 4x the 50 MB L2.
  const int sets = static_cast<int>(std::clamp<size_t>((size_t(400) << 20) / (2 * kv_bytes) + 1, 2, 64));
  std::vector<std::unique_ptr<DeviceMem>> ks, vs;
  for (int i = 0; i < sets; ++i) {
    ks.push_back(std::make_unique<DeviceMem>(kv_bytes));
    vs.push_back(std::make_unique<DeviceMem>(kv_bytes));
    fill_random(ks.back()->p, kv_bytes, 10 + i);
    fill_random(vs.back()->p, kv_bytes, 100 + i);
  }
  const size_t ws_bytes = std::max<size_t>(plan.workspace_bytes(), 256);  // never a zero-byte allocation
  DeviceMem q(size_t(hq) * d * 2), o(size_t(hq) * d * 2), ws(ws_bytes);
  fill_random(q.p, size_t(hq) * d * 2, 7);
  auto tq = make_tensor(q.get(), DType::BF16, {hq, d});
  auto to = make_tensor(o.get(), DType::BF16, {hq, d});
  std::vector<TensorView> tk, tv;
  for (int i = 0; i < sets; ++i) {
    tk.push_back(make_tensor(ks[i]->get(), DType::BF16, {kv_len, hkv, d}));
    tv.push_back(make_tensor(vs[i]->get(), DType::BF16, {kv_len, hkv, d}));
  }
  const int batch = sets * std::max(1, 8 / sets);
  int next = 0;
  auto launch_batch = [&] {
    for (int i = 0; i < batch; ++i, next = (next + 1) % sets)
      plan.run(tq, tk[next], tv[next], to, nullptr, ws.get(), ws_bytes, stream);
  };
  const double us = median_us(launch_batch, batch, 30, stream);
  const double bw = 2.0 * kv_bytes / (us * 1e-6);
  return {hq, hkv, d, tc, kv_len, us, bw, bw / copy_bw, plan.num_splits()};
}

struct JitRow {
  double cold_compile_s = 0, disk_load_ms = 0, memory_hit_us = 0;
};

KernelSpec jit_probe_spec() {
  SingleDecodeProblem p;
  p.num_qo_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.kv_len = 1;
  p.q_dtype = p.kv_dtype = DType::BF16;
  return planner::kernels_for(p)[0];
}

// Cold compile into an empty cache, then an in-memory hit loop.
JitRow bench_jit(const std::string& arch, const std::string& cache_dir) {
  Config cfg = Config::from_env();
  cfg.cache.dir = cache_dir;
  Runtime rt(cfg);
  const KernelSpec spec = jit_probe_spec();
  JitRow row;
  auto t0 = std::chrono::steady_clock::now();
  auto prepared = rt.engine().prepare(spec, arch);
  row.cold_compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (prepared.origin != detail::Origin::Compiled) throw Error(Status::Internal, "bench: the cold-compile probe found a cached entry");
  constexpr int kHits = 200000;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kHits; ++i) rt.engine().prepare(spec, arch);
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
  auto prepared = rt.engine().prepare(jit_probe_spec(), arch);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (prepared.origin != detail::Origin::Disk) throw Error(Status::Internal, "bench: disk-load probe did not load from disk");
  return ms;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure decode bandwidth vs a device copy, and JIT costs");
  struct Opts {
    std::string json_out, arch, probe_dir;
    std::vector<int64_t> kv_lens{4096, 32768, 131072};
    bool jit_only = false, skip_jit = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--json", o->json_out, "Write results as JSON to this file");
  cmd->add_option("--kv-len", o->kv_lens, "KV lengths to time")->expected(1, 16);
  cmd->add_flag("--jit-only", o->jit_only, "Only the JIT timings (no GPU needed)");
  cmd->add_flag("--skip-jit", o->skip_jit, "Skip the JIT timings");
  cmd->add_option("--arch", o->arch, "Arch for the JIT timings (default: local GPU's, else sm_90a)");
  cmd->add_option("--disk-load-probe", o->probe_dir, "(internal) time one disk-cache load in this process")->group("");
  cmd->callback([o] {
    if (!o->arch.empty()) check_arch(o->arch, "--arch");
    Runtime rt;
    const std::string arch = o->arch.empty() ? rt.default_arch() : o->arch;
    if (!o->probe_dir.empty()) {
      fmt::print("{:.3f}\n", disk_load_probe_ms(arch, o->probe_dir));
      return;
    }
    nlohmann::json out;
    out["arch"] = arch;
    if (!o->jit_only) {
      const auto& cu = cuda::driver();
      cuda::ScopedDevice scope(0);
      CUstream stream;
      ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
      const auto info = rt.info();
      const double copy = copy_bandwidth(stream);
      out["device"] = info.devices.empty() ? "" : info.devices[0].name;
      out["copy_bytes_per_s"] = copy;
      fmt::print("device: {}  copy (read+write): {:.0f} GB/s\n", out["device"].get<std::string>(), copy / 1e9);
      fmt::print("{:>5} {:>5} {:>4} {:>3} {:>8} {:>7} {:>10} {:>10} {:>7}\n", "Hq", "Hkv", "D", "tc", "kv_len", "splits",
                 "time(us)", "KV GB/s", "x copy");
      for (auto [hq, hkv] : std::vector<std::pair<int, int>>{{32, 8}, {32, 32}, {64, 8}, {32, 4}})
        for (bool tc : {false, true})
        for (int64_t n : o->kv_lens) {
          const DecodeRow r = bench_decode(rt, hq, hkv, 128, tc, n, copy, stream);
          fmt::print("{:>5} {:>5} {:>4} {:>3} {:>8} {:>7} {:>10.1f} {:>10.0f} {:>7.2f}\n", r.hq, r.hkv, r.d, tc ? "yes" : "no",
                     r.kv_len, r.splits, r.us, r.kv_bytes_per_s / 1e9, r.ratio);
          out["decode"].push_back({{"num_qo_heads", r.hq}, {"num_kv_heads", r.hkv}, {"head_dim", r.d},
                                   {"use_tensor_cores", r.tensor_cores}, {"kv_len", r.kv_len},
                                   {"dtype", "bfloat16"}, {"splits", r.splits}, {"us", r.us},
                                   {"kv_bytes_per_s", r.kv_bytes_per_s}, {"ratio_to_copy", r.ratio}});
        }
      cu.StreamDestroy(stream);
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

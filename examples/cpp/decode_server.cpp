// A serving engine's use of attnjit, in miniature: at start-up it prewarms the
// attention kernels for its model's shape (NVRTC compiles them, or the disk
// cache already has them), then plans once and runs decode steps. On a
// machine without a GPU (a build box, CI) it stops after prewarm: that is
// exactly what such a machine can do for a fleet.
//
//   decode_server [--arch sm_90a] [--qo-heads 32] [--kv-heads 8] [--head-dim 128]
//                 [--kv-len 4096] [--dtype bf16|f16]
//
// Exit status: 0 done; 1 the GPU result disagrees with the CPU reference;
// 2 bad arguments or an attnjit error (its message names what is wrong).
#include <attnjit/attnjit.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_driver.hpp"

namespace {

struct Args {
  std::string arch;  // "" = the GPU's, else attnjit's default
  attnjit::SingleDecodeProblem problem;
};

int to_int(const char* flag, const char* value) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v <= 0 || v > (1L << 30))
    throw attnjit::Error(attnjit::Status::InvalidArgument,
                         std::string(flag) + "='" + value + "' is not a positive integer");
  return static_cast<int>(v);
}

Args parse(int argc, char** argv) {
  Args a;
  auto& p = a.problem;
  p.num_qo_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.kv_len = 4096;
  p.q_dtype = p.kv_dtype = attnjit::DType::BF16;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc)
      throw attnjit::Error(attnjit::Status::InvalidArgument, flag + " needs a value");
    const char* v = argv[i + 1];
    if (flag == "--arch") a.arch = v;
    else if (flag == "--qo-heads") p.num_qo_heads = to_int("--qo-heads", v);
    else if (flag == "--kv-heads") p.num_kv_heads = to_int("--kv-heads", v);
    else if (flag == "--head-dim") p.head_dim = to_int("--head-dim", v);
    else if (flag == "--kv-len") p.kv_len = to_int("--kv-len", v);
    else if (flag == "--dtype") {
      const std::string d = v;
      if (d != "bf16" && d != "f16")
        throw attnjit::Error(attnjit::Status::InvalidArgument, "--dtype='" + d + "'; allowed: bf16, f16");
      p.q_dtype = p.kv_dtype = d == "bf16" ? attnjit::DType::BF16 : attnjit::DType::F16;
    } else {
      throw attnjit::Error(attnjit::Status::InvalidArgument,
                           "unknown option '" + flag +
                               "'; allowed: --arch, --qo-heads, --kv-heads, --head-dim, --kv-len, --dtype");
    }
  }
  return a;
}

// Host-side 16-bit floats (round to nearest even), for the inputs and the check.
uint16_t to_16(float f, attnjit::DType t) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (t == attnjit::DType::BF16) return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // inputs here are never that small
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  if ((mant & 0x1fff) > 0x1000 || ((mant & 0x1fff) == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(h);
}

float from_16(uint16_t h, attnjit::DType t) {
  uint32_t x;
  if (t == attnjit::DType::BF16) {
    x = static_cast<uint32_t>(h) << 16;
  } else {
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    x = exp == 0 ? sign : sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// One decode step on the GPU against a float reference on the host; returns the max |error|.
double run_one_step(const attnjit::Runtime& rt, const attnjit::SingleDecodeProblem& p) {
  example::CudaDriver cu(p.device);
  const int64_t H = p.num_qo_heads, Hk = p.num_kv_heads, D = p.head_dim, L = p.kv_len;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto random16 = [&](size_t n) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = to_16(dist(rng), p.q_dtype);
    return v;
  };
  const std::vector<uint16_t> q = random16(H * D), k = random16(L * Hk * D), v = random16(L * Hk * D);
  example::DeviceMemory dq(cu, q.size() * 2), dk(cu, k.size() * 2), dv(cu, v.size() * 2), dout(cu, H * D * 2);
  cu.to_device(dq.address(), q.data(), dq.bytes());
  cu.to_device(dk.address(), k.data(), dk.bytes());
  cu.to_device(dv.address(), v.data(), dv.bytes());

  // Plan once (a serving engine keeps the plan per model shape), then run: no
  // allocation or compilation happens inside run(), so it can be graph-captured.
  attnjit::SingleDecodePlan plan(rt, p);
  example::DeviceMemory workspace(cu, plan.workspace_bytes());
  std::printf("plan: %s\n", plan.describe().c_str());
  const auto t = p.q_dtype;
  plan.run(attnjit::make_tensor(dq.get(), t, {H, D}), attnjit::make_tensor(dk.get(), t, {L, Hk, D}),
           attnjit::make_tensor(dv.get(), t, {L, Hk, D}), attnjit::make_tensor(dout.get(), t, {H, D}), nullptr,
           workspace.get(), workspace.bytes(), nullptr);
  cu.synchronize();
  std::vector<uint16_t> out(H * D);
  cu.to_host(out.data(), dout.address(), dout.bytes());

  double worst = 0;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> s(L);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t kh = h / (H / Hk);
    double m = -1e300, sum = 0;
    for (int64_t j = 0; j < L; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d)
        dot += from_16(q[h * D + d], t) * from_16(k[(j * Hk + kh) * D + d], t);
      s[j] = dot * scale;
      m = std::max(m, s[j]);
    }
    for (auto& x : s) sum += (x = std::exp(x - m));
    for (int64_t d = 0; d < D; ++d) {
      double o = 0;
      for (int64_t j = 0; j < L; ++j) o += s[j] * from_16(v[(j * Hk + kh) * D + d], t);
      worst = std::max(worst, std::fabs(o / sum - from_16(out[h * D + d], t)));
    }
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args args = parse(argc, argv);
    attnjit::Runtime rt;  // configuration from the environment (ATTNJIT_CACHE_DIR, ATTNJIT_CACHE_MODE, ...)
    const attnjit::RuntimeInfo info = rt.info();
    std::printf("attnjit %s, NVRTC %s, %zu GPU(s), cache %s\n", info.version.c_str(),
                info.nvrtc_version.empty() ? "(not loaded)" : info.nvrtc_version.c_str(), info.devices.size(),
                info.cache.dir.c_str());

    // Start-up: every kernel this shape needs, before the first request.
    // It validates the problem as planning does (a bad head_dim fails here, not at the first request).
    for (const auto& k : attnjit::prewarm_single_decode(rt, args.problem, args.arch)) {
      std::printf("prewarm: %s for %s: %s", k.name.c_str(), k.arch.c_str(), k.origin.c_str());
      if (k.origin == "compiled") std::printf(" in %.2f s", k.compile_seconds);
      std::printf("\n");
    }

    if (info.devices.empty()) {
      // A build or CI machine: the cache now holds what a GPU machine of this arch needs.
      std::printf("no GPU here: problem validated and its kernels prewarmed; running needs a GPU (%s)\n",
                  info.driver_error.empty() ? "no device" : info.driver_error.c_str());
      return 0;
    }
    const double err = run_one_step(rt, args.problem);
    std::printf("decode step on %s: max |error| vs the CPU reference %.3g\n", info.devices[0].name.c_str(), err);
    return err < 2e-2 ? 0 : 1;
  } catch (const attnjit::Error& e) {
    std::fprintf(stderr, "decode_server: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_server: error: %s\n", e.what());
    return 2;
  }
}

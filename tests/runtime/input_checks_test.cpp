// Input is refused before any work starts: unknown archs, kernel specs the
// templates cannot take, unknown environment values. Each message names the
// argument, its value and what is allowed; nothing is created on disk.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "arch.hpp"
#include "attnjit/config.hpp"
#include "attnjit/error.hpp"
#include "engine.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_decode/single_decode_problem.hpp"
#include "reference/decode_grid.hpp"
#include "support/error_capture.hpp"
#include "spec/kernel_spec.hpp"
#include "support/cache_support.hpp"

namespace attnjit::test {
namespace {

DecodeKernel decode_spec() {
  DecodeKernel s;
  s.head_dim = 128;
  s.variant.q_dtype = s.variant.kv_dtype = s.variant.o_dtype = DType::BF16;
  s.heads_per_cta = 1;
  s.warps = 4;
  s.unroll = 4;
  return s;
}

std::string spec_error(const KernelSpec& s) {
  try {
    s.validate();
  } catch (const Error& e) {
    CHECK(e.status() == Status::InvalidArgument);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("unknown archs are refused with the list of known ones", "[input]") {
  for (const char* good : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120", "sm_120f"})
    CHECK_NOTHROW(check_arch(good, "--arch"));
  for (const char* bad : {"sm_12", "sm_99", "banana", "", "sm_80a", "sm_90f", "compute_90", "SM_90", "sm_75"}) {
    INFO(bad);
    try {
      check_arch(bad, "--arch");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.status() == Status::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains(std::string("--arch='") + bad + "' is not a known arch"));
      CHECK_THAT(e.what(), Catch::Contains("sm_80, sm_86") && Catch::Contains("sm_90a"));
    }
  }
}

TEST_CASE("programmatic dependent launch from sm_90 on", "[input]") {
  for (const char* yes : {"sm_90", "sm_90a", "sm_100a", "sm_120f"}) CHECK(has_pdl(yes));
  for (const char* no : {"sm_80", "sm_86", "sm_89", "", "compute_90"}) CHECK_FALSE(has_pdl(no));
}

TEST_CASE("every kernel-spec field is checked against what the templates take", "[input]") {
  CHECK(spec_error(decode_spec()).empty());
  auto with = [](auto change) {
    DecodeKernel s = decode_spec();
    change(s);
    return spec_error(s);
  };
  CHECK_THAT(with([](DecodeKernel& s) { s.head_dim = 96; }),
             Catch::Contains("spec.head_dim=96 is not supported; allowed: 64, 128, 256"));
  CHECK_THAT(with([](DecodeKernel& s) { s.head_dim = 256; s.tensor_cores = true; }),
             Catch::Contains("spec.head_dim=256") && Catch::Contains("64, 128 (tensor cores)"));
  CHECK_THAT(with([](DecodeKernel& s) { s.variant.q_dtype = DType::F32; }), Catch::Contains("spec.q_dtype=float32"));
  CHECK_THAT(with([](DecodeKernel& s) { s.variant.kv_dtype = DType::F16; }), Catch::Contains("spec.kv_dtype=float16"));
  CHECK_THAT(with([](DecodeKernel& s) { s.variant.kv_dtype = DType::F32; }), Catch::Contains("spec.kv_dtype=float32"));
  CHECK_THAT(with([](DecodeKernel& s) { s.variant.o_dtype = DType::F32; }), Catch::Contains("spec.o_dtype=float32"));
  CHECK_THAT(with([](DecodeKernel& s) { s.warps = 3; }), Catch::Contains("spec.warps=3"));
  CHECK_THAT(with([](DecodeKernel& s) { s.unroll = 0; }), Catch::Contains("spec.unroll=0"));
  CHECK_THAT(with([](DecodeKernel& s) { s.heads_per_cta = 9; }),
             Catch::Contains("spec.heads_per_cta=9") && Catch::Contains("1 to 8"));
  CHECK_THAT(with([](DecodeKernel& s) { s.heads_per_cta = 0; }), Catch::Contains("spec.heads_per_cta=0"));
  CHECK(with([](DecodeKernel& s) { s.heads_per_cta = 16; s.tensor_cores = true; }).empty());
  CHECK(with([](DecodeKernel& s) { s.variant.kv_dtype = DType::E4M3; }).empty());

  MergeKernel merge;
  merge.head_dim = 64;
  merge.o_dtype = DType::F16;
  CHECK(spec_error(merge).empty());
  merge.head_dim = 32;
  CHECK_THAT(spec_error(merge), Catch::Contains("spec.head_dim=32"));
}

TEST_CASE("every spec the planner makes for the decode grid passes the spec checks", "[input]") {
  // Engine::prepare validates every spec: it must never refuse one the planner made.
  size_t checked = 0;
  for (const auto& c : decode_grid())
    for (const auto& s : ops::single_decode_kernels(c.p)) {
      INFO(s.name());
      CHECK(spec_error(s).empty());
      ++checked;
    }
  CHECK(checked > 0);
}

TEST_CASE("Engine::prepare refuses a bad spec or arch before touching the cache folder or NVRTC", "[input]") {
  TempDir dir;
  Config config;
  config.cache = config_for(dir.path() / "cache");
  config.nvrtc_library = "/nonexistent/libnvrtc.so";  // must never be reached
  detail::Engine engine(config);
  DecodeKernel bad = decode_spec();
  bad.head_dim = 96;
  CHECK_THAT(error_of([&] { engine.prepare(bad, "sm_90a"); }, Status::InvalidArgument), Catch::Contains("head_dim=96"));
  CHECK_THAT(error_of([&] { engine.prepare(decode_spec(), "sm_12"); }, Status::InvalidArgument),
             Catch::Contains("arch='sm_12' is not a known arch"));
  CHECK(files_under(dir.path()).empty());  // no lock file, no temporary
  CHECK_FALSE(fs::exists(dir.path() / "cache" / "sm_12"));
  CHECK_FALSE(fs::exists(dir.path() / "cache" / "sm_90a"));
}

TEST_CASE("every SingleDecodeProblem field is checked before planning, naming field, value and allowed set", "[input]") {
  auto base = [] { return d128_decode_problem(32, 8, 1000); };
  CHECK_NOTHROW(ops::validate(base()));
  auto refused = [&](auto change, Status status, const std::string& needle) {
    SingleDecodeProblem p = base();
    change(p);
    INFO(needle);
    CHECK_THAT(error_of([&] { ops::single_decode_kernels(p); }, status), Catch::Contains(needle));
  };
  const auto bad = Status::InvalidArgument;
  refused([](auto& p) { p.num_qo_heads = 0; }, bad, "num_qo_heads=0 is not allowed; it must be > 0");
  refused([](auto& p) { p.num_kv_heads = -1; }, bad, "num_kv_heads=-1 is not allowed; it must be > 0");
  refused([](auto& p) { p.num_qo_heads = 30; }, bad, "num_qo_heads=30 is not allowed; it must be a multiple of num_kv_heads=8");
  refused([](auto& p) { p.head_dim = 96; }, Status::Unsupported, "head_dim=96 is not supported; supported: 64, 128, 256");
  refused([](auto& p) { p.kv_len = 0; }, bad, "kv_len=0 is not allowed; it must be in [1, ");
  refused([](auto& p) { p.q_dtype = DType::E4M3; }, bad, "q.dtype=float8_e4m3fn is not supported; allowed: float16, bfloat16");
  refused([](auto& p) { p.kv_dtype = DType::F32; }, bad, "k.dtype=float32 is not supported");
  refused([](auto& p) { p.kv_dtype = DType::F16; }, bad, "k.dtype=float16 must equal q.dtype=bfloat16");
  refused([](auto& p) { p.device = -1; }, bad, "device=-1 must be >= 0");
  refused([](auto& p) { p.options.window_left = -2; }, bad, "window_left=-2 is not allowed; use -1 (no window) or >= 0");
  refused([](auto& p) { p.options.q_scale = 0.f; }, bad, "q_scale=0 is not allowed; it must be a finite number > 0");
  refused([](auto& p) { p.options.k_scale = NAN; }, bad, "k_scale=nan is not allowed");
  refused([](auto& p) { p.options.v_scale = -1.f; }, bad, "v_scale=-1 is not allowed");
  refused([](auto& p) { p.options.sm_scale = INFINITY; }, bad, "sm_scale=inf is not allowed");
  refused([](auto& p) { p.options.rope_scale = 0.f; }, bad, "rope_scale=0 is not allowed");
  refused([](auto& p) { p.options.rope_theta = -5.f; }, bad, "rope_theta=-5 is not allowed");
  refused([](auto& p) { p.options.logits_soft_cap = -1.f; }, bad, "logits_soft_cap=-1 is not allowed; it must be >= 0");
}

TEST_CASE("an unknown ATTNJIT_LOG_LEVEL is refused like an unknown cache mode", "[input]") {
  // Restores the variable however the test ends: later tests read the environment.
  struct Restore {
    const char* saved = std::getenv("ATTNJIT_LOG_LEVEL");
    std::string value = saved ? saved : "";
    ~Restore() { saved ? ::setenv("ATTNJIT_LOG_LEVEL", value.c_str(), 1) : ::unsetenv("ATTNJIT_LOG_LEVEL"); }
  } restore;
  ::setenv("ATTNJIT_LOG_LEVEL", "loud", 1);
  CHECK_THAT(error_of([] { Config::from_env(); }, Status::InvalidArgument),
             Catch::Contains("ATTNJIT_LOG_LEVEL='loud' is not a log level; allowed: trace, debug, info, warn, error, off"));
  ::setenv("ATTNJIT_LOG_LEVEL", "debug", 1);
  CHECK_NOTHROW(Config::from_env());
}

}  // namespace attnjit::test

// The decode skeletons instantiated with the paged KV sources (FlashInfer
// indptr/indices/last_page_len and block tables) and with each mask mode
// compile with NVRTC for sm_80 and sm_90a. No kernel uses them yet, so
// without this a broken paged path would surface only when batch decode lands.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>

#include "codegen.hpp"
#include "cuda/nvrtc.hpp"
#include "embedded_sources.hpp"

using namespace attnjit;

namespace {

// The single-decode templates with the KV source and mask mode as placeholders.
constexpr const char* kCudaCoreTemplate = R"(#include "decode.cuh"
using Traits = attnjit::DecodeTraits<{{HEAD_DIM}}, {{HEADS}}, attnjit::{{Q}}, attnjit::{{KV}}, attnjit::{{Q}}, {{POS}},
                                     {{CAP}}, 4, {{UNROLL}}, attnjit::{{SOURCE}}, attnjit::kernels::{{MASK}}>;
extern "C" __global__ void __launch_bounds__(Traits::kThreads)
attnjit_decode(const __grid_constant__ attnjit::kernels::DecodeParams params) {
  attnjit::single_decode<Traits>(params);
}
)";
constexpr const char* kTensorCoreTemplate = R"(#include "decode_mma.cuh"
using Traits = attnjit::DecodeMmaTraits<{{HEAD_DIM}}, {{HEADS}}, attnjit::{{Q}}, attnjit::{{KV}}, attnjit::{{Q}}, {{POS}},
                                        {{CAP}}, 4, attnjit::{{SOURCE}}, attnjit::kernels::{{MASK}}>;
extern "C" __global__ void __launch_bounds__(Traits::kThreads)
attnjit_decode(const __grid_constant__ attnjit::kernels::DecodeParams params) {
  attnjit::single_decode_mma<Traits>(params);
}
)";

struct Case {
  bool tensor_cores;
  int head_dim, heads;
  const char *q, *kv;
  int pos;  // kernels::PosEncodingMode
  bool cap;
  int unroll;
  const char* mask;
};

// A few shapes and dtypes per skeleton, covering every positional mode and mask mode.
const Case kCases[] = {
    {false, 128, 1, "bf16", "bf16", 0, false, 4, "kMaskNone"},
    {false, 64, 4, "f16", "e4m3", 1, false, 2, "kMaskCustom"},
    {false, 256, 2, "bf16", "e5m2", 2, true, 4, "kMaskCausal"},
    {true, 128, 4, "bf16", "bf16", 2, true, 0, "kMaskCausal"},
    {true, 64, 8, "f16", "e5m2", 1, false, 0, "kMaskCustom"},
    {true, 128, 16, "f16", "f16", 0, false, 0, "kMaskNone"},
};

}  // namespace

TEST_CASE("NVRTC compiles both decode skeletons with paged KV sources and every mask mode", "[nvrtc][kv_sources]") {
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& h : embedded::headers()) headers.emplace_back(std::string(h.name), std::string(h.text));
  struct Job {
    std::string name, source, arch;
  };
  std::vector<Job> jobs;
  for (const char* src : {"PagedKV", "BlockTableKV"})
    for (const Case& c : kCases)
      for (const char* arch : {"sm_80", "sm_90a"}) {
        const std::string name = std::string(c.tensor_cores ? "tc" : "cc") + "_" + src + "_d" +
                                 std::to_string(c.head_dim) + "_g" + std::to_string(c.heads) + "_" + c.kv + "_" +
                                 c.mask + "_" + arch;
        std::vector<std::pair<std::string, std::string>> values = {
            {"HEAD_DIM", std::to_string(c.head_dim)}, {"HEADS", std::to_string(c.heads)},
            {"Q", c.q},                               {"KV", c.kv},
            {"POS", std::to_string(c.pos)},           {"CAP", c.cap ? "true" : "false"},
            {"SOURCE", src},                          {"MASK", c.mask}};
        if (!c.tensor_cores) values.emplace_back("UNROLL", std::to_string(c.unroll));
        jobs.push_back({name, fill_template(c.tensor_cores ? kTensorCoreTemplate : kCudaCoreTemplate, values, name),
                        arch});
      }

  std::atomic<size_t> next{0};
  std::mutex mu;
  std::vector<std::string> failures;
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      const Job& job = jobs[i];
      try {
        cuda::CompileRequest req{job.source, job.name + ".cu", headers, {"-std=c++17"}, job.arch};
        const auto res = cuda::compile("", req);
        if (res.cubin.size() < 4 || res.cubin[0] != 0x7f) throw std::runtime_error("not an ELF cubin");
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(job.name + ": " + e.what());
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::max(2u, std::thread::hardware_concurrency()); ++w) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}

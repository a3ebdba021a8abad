// NVRTC loading and compiling, on any machine with an NVRTC library (no GPU needed).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "attnjit/error.hpp"
#include "cuda/nvrtc.hpp"
#include "support/error_capture.hpp"

using attnjit::Error;
using attnjit::Status;
namespace cuda = attnjit::cuda;

using attnjit::test::error_of;

namespace {

// A tiny kernel whose constant comes from an in-memory header.
cuda::CompileRequest small_request(const std::string& arch) {
  cuda::CompileRequest req;
  req.name = "small.cu";
  req.arch = arch;
  req.headers = {{"my.cuh", "#pragma once\n#define MY_SCALE 3\n"}};
  req.source =
      "#include \"my.cuh\"\n"
      "extern \"C\" __global__ void scale(float* p) { p[threadIdx.x] *= MY_SCALE; }\n";
  return req;
}

bool is_elf(const std::vector<char>& b) {
  return b.size() > 4 && b[0] == '\x7f' && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("NVRTC loads and reports its version and archs", "[nvrtc]") {
  REQUIRE(cuda::nvrtc_available(""));
  const auto& info = cuda::nvrtc_info("");
  CHECK(info.major >= 12);
  CHECK_FALSE(info.library.empty());
  const auto archs = cuda::supported_archs("");
  CHECK(contains(archs, "sm_80"));
  CHECK(contains(archs, "sm_90"));
}

TEST_CASE("NVRTC compiles with in-memory headers and no include path", "[nvrtc]") {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SECTION(arch) {
      const auto r = cuda::compile("", small_request(arch));
      CHECK(is_elf(r.cubin));
      CHECK(r.seconds > 0);
    }
  }
}

TEST_CASE("NVRTC output is byte-identical across compiles", "[nvrtc]") {
  const auto opts = cuda::compile_options(small_request("sm_90a"));
  CHECK(opts.front() == "--gpu-architecture=sm_90a");
  CHECK(contains(opts, "--frandom-seed=1"));
  // Internal-linkage device variables are where NVRTC would otherwise invent names.
  auto req = small_request("sm_90a");
  req.source += "namespace { __device__ int hits; }\n"
                "extern \"C\" __global__ void count() { atomicAdd(&hits, 1); }\n";
  const auto a = cuda::compile("", req);
  const auto b = cuda::compile("", req);
  CHECK(a.cubin == b.cubin);
}

TEST_CASE("NVRTC compiles concurrently from several threads", "[nvrtc]") {
  const auto expected = cuda::compile("", small_request("sm_80")).cubin;
  std::vector<std::vector<char>> out(4);
  std::vector<std::string> errors(out.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < out.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        out[i] = cuda::compile("", small_request("sm_80")).cubin;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < out.size(); ++i) {
    CHECK(errors[i] == "");
    CHECK(out[i] == expected);
  }
}

TEST_CASE("generated code needs no toolkit header: inline PTX conversions compile", "[nvrtc]") {
  cuda::CompileRequest req;
  req.name = "ptx_only.cu";
  req.source = R"(
    extern "C" __global__ void to_half(const float* in, unsigned short* out) {
      unsigned short h;
      asm volatile("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(in[threadIdx.x]));
      out[threadIdx.x] = h;
    })";
  for (const char* arch : {"sm_80", "sm_90a"}) {
    req.arch = arch;
    CHECK(is_elf(cuda::compile("", req).cubin));
  }
}

TEST_CASE("NVRTC finds no toolkit header: no include path is passed", "[nvrtc]") {
  // source, name, headers, options, arch
  const cuda::CompileRequest req{"#include <cuda_fp16.h>\nextern \"C\" __global__ void k() {}\n", "wants_toolkit.cu", {},
                                 {}, "sm_80"};
  const auto msg = error_of([&] { cuda::compile("", req); }, Status::CompileError);
  CHECK_THAT(msg, Catch::Contains("cuda_fp16.h"));
}

TEST_CASE("a compile error carries NVRTC's log and the program name", "[nvrtc]") {
  const cuda::CompileRequest req{"extern \"C\" __global__ void k(int* p) { p[0] = 1 }\n", "broken.cu", {}, {}, "sm_80"};
  const auto msg = error_of([&] { cuda::compile("", req); }, Status::CompileError);
  CHECK_THAT(msg, Catch::Contains("broken.cu(1): error: expected a \";\""));
  CHECK_THAT(msg, Catch::Contains("could not compile 'broken.cu' for sm_80"));
}

TEST_CASE("an arch NVRTC cannot target is an invalid argument listing the supported ones", "[nvrtc]") {
  for (const char* arch : {"sm_1", "sm_80a", "compute_90", "sm_90x", "90"}) {
    SECTION(arch) {
      const auto msg = error_of([&] { cuda::compile("", small_request(arch)); }, Status::InvalidArgument);
      CHECK_THAT(msg, Catch::Contains(std::string("arch='") + arch + "'"));
      CHECK_THAT(msg, Catch::Contains("sm_80") && Catch::Contains("sm_90"));
    }
  }
}

TEST_CASE("an explicit NVRTC library that does not load names the variable and the path", "[nvrtc]") {
  const std::string path = "/nonexistent/attnjit-test/libnvrtc.so.99";
  CHECK_FALSE(cuda::nvrtc_available(path));
  const auto msg = error_of([&] { cuda::compile(path, small_request("sm_80")); }, Status::Unsupported);
  CHECK_THAT(msg, Catch::Contains("ATTNJIT_NVRTC_LIBRARY") && Catch::Contains(path));
  // The failure is remembered, not retried into a different library.
  const auto again = error_of([&] { cuda::nvrtc_info(path); }, Status::Unsupported);
  CHECK(again == msg);
}

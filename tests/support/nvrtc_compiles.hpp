// That a kernel spec's generated source compiles with NVRTC for sm_80 and
// sm_90a into an ELF cubin: for the planner tests, which test what a plan
// chose (codegen and NVRTC are internals: the planner layer's own).
#pragma once
#include <catch2/catch.hpp>

#include "codegen.hpp"
#include "cuda/nvrtc.hpp"
#include "spec/kernel_spec.hpp"

namespace attnjit::test {

inline void check_compiles(const KernelSpec& spec) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    INFO(spec.name() << " " << arch);
    const TranslationUnit tu = generate(spec);
    cuda::CompileRequest req{tu.source, tu.name, tu.headers, {"-std=c++17"}, arch};
    const auto res = cuda::compile("", req);
    REQUIRE(res.cubin.size() > 4);
    CHECK(res.cubin[0] == 0x7f);  // ELF
  }
}

}  // namespace attnjit::test

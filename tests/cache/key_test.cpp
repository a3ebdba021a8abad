// The cache key: pinned by a golden value, and sensitive to every input that
// can change the cubin.
#include <catch2/catch.hpp>

#include "cache/cache_key.hpp"
#include "codegen.hpp"

using namespace attnjit;

namespace {

TranslationUnit fixed_tu() {
  TranslationUnit tu;
  tu.name = "k.cu";
  tu.source = "#include \"a.cuh\"\nextern \"C\" __global__ void k() {}\n";
  tu.headers = {{"a.cuh", "#pragma once\n"}, {"b.cuh", "// b\n"}};
  return tu;
}

KeyInputs fixed_inputs(const TranslationUnit& tu) {
  KeyInputs in;
  in.source = &tu.source;
  in.headers = &tu.headers;
  in.nvrtc_version = "13.0";
  in.options = {"--frandom-seed=1", "-std=c++17"};
  in.arch = "sm_90a";
  in.library_version = "0.1.0";
  return in;
}

}  // namespace

TEST_CASE("cache key is pinned for fixed inputs", "[key]") {
  const auto tu = fixed_tu();
  const std::string key = make_cache_key(fixed_inputs(tu));
  CHECK(key.size() == 64);
  // Golden: changing how the key is computed must be deliberate (bump
  // kCacheSchemaVersion and update this value).
  CHECK(key == "4767b04fa5d0c8e57f8af9c61d280fe3a920adb6e018447090933e70c82ec5c9");
}

TEST_CASE("cache key changes with every input", "[key]") {
  const auto tu = fixed_tu();
  const std::string base = make_cache_key(fixed_inputs(tu));
  auto differs = [&](auto mutate) {
    TranslationUnit t = fixed_tu();
    KeyInputs in = fixed_inputs(t);
    mutate(t, in);
    in.source = &t.source;
    in.headers = &t.headers;
    return make_cache_key(in) != base;
  };
  CHECK(differs([](TranslationUnit& t, KeyInputs&) { t.source += " "; }));
  CHECK(differs([](TranslationUnit& t, KeyInputs&) { t.headers[1].second += "x"; }));
  CHECK(differs([](TranslationUnit& t, KeyInputs&) { t.headers[0].first = "c.cuh"; }));
  CHECK(differs([](TranslationUnit& t, KeyInputs&) { t.headers.pop_back(); }));
  CHECK(differs([](TranslationUnit&, KeyInputs& in) { in.nvrtc_version = "13.1"; }));
  CHECK(differs([](TranslationUnit&, KeyInputs& in) { in.options.push_back("-lineinfo"); }));
  CHECK(differs([](TranslationUnit&, KeyInputs& in) { in.options = {"-std=c++17", "--frandom-seed=1"}; }));
  CHECK(differs([](TranslationUnit&, KeyInputs& in) { in.arch = "sm_80"; }));
  CHECK(differs([](TranslationUnit&, KeyInputs& in) { in.library_version = "0.1.1"; }));
  // Field boundaries are length-prefixed: moving a character between fields changes the key.
  CHECK(differs([](TranslationUnit&, KeyInputs& in) { in.nvrtc_version = "13.0s"; in.arch = "m_90a"; }));
}

TEST_CASE("every KernelSpec field changes the generated source", "[key][codegen]") {
  DecodeKernel s;
  s.heads_per_cta = 2;
  const std::string base = generate(s).source;
  auto differs = [&](auto mutate) {
    DecodeKernel t = s;
    mutate(t);
    return generate(t).source != base;
  };
  CHECK(differs([](DecodeKernel& t) { t.head_dim = 64; }));
  CHECK(differs([](DecodeKernel& t) { t.variant.q_dtype = DType::BF16; t.variant.kv_dtype = DType::BF16; }));
  CHECK(differs([](DecodeKernel& t) { t.variant.kv_dtype = DType::E5M2; }));
  CHECK(differs([](DecodeKernel& t) { t.variant.o_dtype = DType::BF16; }));
  CHECK(differs([](DecodeKernel& t) { t.variant.pos_encoding = PosEncoding::Alibi; }));
  CHECK(differs([](DecodeKernel& t) { t.variant.soft_cap = true; }));
  CHECK(differs([](DecodeKernel& t) { t.heads_per_cta = 3; }));
  CHECK(differs([](DecodeKernel& t) { t.unroll = 2; }));
  CHECK(differs([](DecodeKernel& t) { t.tensor_cores = true; }));
  CHECK(generate(MergeKernel{}).source != base);
}

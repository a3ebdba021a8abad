// Codegen: templates fill completely, generated code includes only embedded
// headers, and specs round-trip through JSON.
#include <catch2/catch.hpp>

#include <regex>
#include <set>

#include "attnjit/error.hpp"
#include "codegen.hpp"
#include "embedded_sources.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "reference/decode_grid.hpp"

using namespace attnjit;

namespace {

DecodeKernel sample_decode() {
  DecodeKernel s;
  s.head_dim = 128;
  s.variant.q_dtype = DType::BF16;
  s.variant.kv_dtype = DType::E4M3;
  s.variant.o_dtype = DType::BF16;
  s.variant.pos_encoding = PosEncoding::RopeLlama;
  s.variant.soft_cap = true;
  s.heads_per_cta = 4;
  return s;
}

}  // namespace

TEST_CASE("generated code includes only embedded headers, with quotes", "[codegen]") {
  std::set<std::string> embedded;
  for (const auto& h : embedded::headers()) embedded.insert(std::string(h.name));
  REQUIRE(embedded.count("decode.cuh"));
  REQUIRE(embedded.count("merge.cuh"));
  const std::regex include_re(R"(#\s*include\s*([<"])([^>"]+)[>"])");
  for (const KernelSpec& spec : {KernelSpec(sample_decode()), KernelSpec(MergeKernel{})}) {
    const TranslationUnit tu = generate(spec);
    CHECK(tu.source.find("{{") == std::string::npos);
    CHECK(tu.source.find(spec.entry_name()) != std::string::npos);
    std::vector<std::string> texts = {tu.source};
    for (const auto& [n, t] : tu.headers) texts.push_back(t);
    for (const auto& text : texts)
      for (std::sregex_iterator it(text.begin(), text.end(), include_re), end; it != end; ++it) {
        // Host-only branches (never seen by NVRTC) are marked so on the line.
        const auto eol = text.find('\n', it->position());
        if (text.substr(it->position(), eol - it->position()).find("// host builds only") != std::string::npos)
          continue;
        INFO("include " << (*it)[0]);
        CHECK((*it)[1] == "\"");
        CHECK(embedded.count((*it)[2]) == 1);
      }
  }
}

TEST_CASE("kernel specs round-trip through JSON and have distinct names", "[codegen]") {
  const KernelSpec s = sample_decode();
  CHECK(KernelSpec::from_json(s.to_json()) == s);
  CHECK(s.name() == "decode_d128_g4_bf16_e4m3_bf16_rope_softcap_w4_u4");
  DecodeKernel t = sample_decode();
  t.variant.soft_cap = false;
  CHECK(KernelSpec(t).name() != s.name());
  try {
    KernelSpec::from_json(nlohmann::json{{"family", "append"}});
    FAIL("accepted an unknown family");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("allowed: decode, merge_states, prefill") != std::string::npos);
  }
  PrefillKernel pk;
  pk.kv_source = KVSource::Paged;
  pk.window = true;
  pk.variant.mask = MaskMode::Causal;
  CHECK(KernelSpec::from_json(KernelSpec(pk).to_json()) == KernelSpec(pk));
  CHECK(KernelSpec(pk).name() == "prefill_d128_m1_s2_f16_f16_f16_none_causal_window_paged");
  try {
    KernelSpec::from_json(nlohmann::json{{"family", "merge_states"}, {"head_dim", 128}, {"o_dtype", "float99"}});
    FAIL("accepted a bad dtype");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("spec.o_dtype='float99'") != std::string::npos);
  }
}

TEST_CASE("every family's spec round-trips through JSON, field by field", "[codegen][spec]") {
  // Each alternative of KernelSpec::Family, with every field off its default.
  DecodeKernel d = sample_decode();
  d.tensor_cores = true;
  d.variant.pos_encoding = PosEncoding::Alibi;
  d.variant.o_dtype = DType::BF16;
  DecodeKernel c = sample_decode();
  c.unroll = 2;
  c.head_dim = 256;
  MergeKernel m;
  m.head_dim = 64;
  m.o_dtype = DType::BF16;
  m.warps = 8;
  for (const KernelSpec& s : {KernelSpec(d), KernelSpec(c), KernelSpec(m), KernelSpec(sample_decode())}) {
    INFO(s.to_json().dump());
    const KernelSpec back = KernelSpec::from_json(s.to_json());
    CHECK(back == s);
    CHECK(back.identity() == s.identity());
    CHECK(back.name() == s.name());
    CHECK(std::string(back.family_name()) == s.to_json().at("family").get<std::string>());
  }
  // The identity (the registry's key) tells specs apart that a name might not.
  CHECK(KernelSpec(d).identity() != KernelSpec(sample_decode()).identity());
  // Every field is validated: an out-of-range value is refused by name.
  auto j = KernelSpec(c).to_json();
  j["heads_per_cta"] = 99;
  try {
    KernelSpec::from_json(j);
    FAIL("accepted heads_per_cta=99");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("spec.heads_per_cta=99") != std::string::npos);
  }
  j = KernelSpec(c).to_json();
  j["head_dim"] = 96;
  CHECK_THROWS_AS(KernelSpec::from_json(j), Error);
  j = KernelSpec(c).to_json();
  j["head_dim"] = "128";
  CHECK_THROWS_AS(KernelSpec::from_json(j), Error);
}

TEST_CASE("fill_template reports missing and leftover placeholders", "[codegen]") {
  CHECK(fill_template("a {{X}} b {{X}}", {{"X", "1"}}, "t") == "a 1 b 1");
  CHECK_THROWS_AS(fill_template("a {{X}} {{Y}}", {{"X", "1"}}, "t"), Error);
  CHECK_THROWS_AS(fill_template("a", {{"X", "1"}}, "t"), Error);
}

TEST_CASE("run-time values do not change the kernel", "[codegen][planner]") {
  const SingleDecodeProblem a = test::d128_decode_problem(32, 8, 100);
  SingleDecodeProblem b = a;
  b.kv_len = 100000;
  b.options.kv_layout = KVLayout::HND;
  b.options.window_left = 50;
  b.options.sm_scale = 0.3f;
  b.options.rope_theta = 5e5f;
  b.options.return_lse = true;
  const auto ka = ops::single_decode_kernels(a), kb = ops::single_decode_kernels(b);
  REQUIRE(ka.size() == kb.size());
  for (size_t i = 0; i < ka.size(); ++i) CHECK(ka[i].name() == kb[i].name());
  b.options.logits_soft_cap = 30.f;  // changes generated code
  CHECK(ops::single_decode_kernels(b)[0].name() != ka[0].name());
}

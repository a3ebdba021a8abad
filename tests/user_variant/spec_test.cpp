// User variants (issue 31) without a GPU: the declaration's checks, the
// packed Params, the spec's identity, NVRTC compiling snippets into every
// attention skeleton, and a snippet that does not compile: INVALID_ARGUMENT at
// its own line, nothing cached.
#include <catch2/catch.hpp>

#include <cstring>

#include "attnjit/error.hpp"
#include "attnjit/variant.hpp"
#include "codegen.hpp"
#include "cuda/nvrtc.hpp"
#include "support/dltensor_maker.hpp"
#include "engine.hpp"
#include "ops/attention_options/user_variant_options.hpp"
#include "spec/user_variant.hpp"
#include "support/cache_support.hpp"
#include "support/temp_cache_engine.hpp"

namespace attnjit::test {

namespace {

VariantSource doc_mask() {
  VariantSource s;
  s.mask_mod = "return p.doc_at(q + p.q_offset) == p.doc_at(kv);";
  s.params = {{"doc", VariantParamType::I32, 1}, {"q_offset", VariantParamType::I32, 0}};
  return s;
}

VariantSource bias_table() {
  VariantSource s;
  s.score_mod = "const int d = min(max(kv - q + p.zero, 0), int(p.bias_shape[1]) - 1);\n"
                "return s + p.scale * float(p.bias_at(h, d));";
  s.params = {{"bias", VariantParamType::BF16, 2}, {"scale", VariantParamType::F32, 0},
              {"zero", VariantParamType::I32, 0}};
  return s;
}

PrefillKernel prefill_with(const VariantSource& u, MaskMode mask = MaskMode::Custom) {
  PrefillKernel k;
  k.head_dim = 64;
  k.variant.q_dtype = k.variant.kv_dtype = k.variant.o_dtype = DType::BF16;
  k.variant.mask = mask;
  k.variant.user = std::make_shared<const VariantSource>(u);
  return k;
}

template <class F>
std::string invalid_message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.status() == Status::InvalidArgument);
    return e.what();
  }
  FAIL("no error was thrown");
  return "";
}

size_t cubins_under(const fs::path& dir) {
  size_t n = 0;
  if (fs::exists(dir))
    for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.path().extension() == ".cubin";
  return n;
}

}  // namespace

TEST_CASE("a variant declaration is checked field by field", "[user_variant]") {
  CHECK_THAT(invalid_message([] { Variant("", "", {}); }), Catch::Contains("score_mod and mask_mod are both empty"));
  CHECK_THAT(invalid_message([] { Variant("return s;", "", {{"2x", VariantParamType::F32, 0}}); }),
             Catch::Contains("params[0].name='2x'"));
  CHECK_THAT(invalid_message([] { Variant("return s;", "", {{"kv", VariantParamType::F32, 0}}); }),
             Catch::Contains("name='kv'"));
  CHECK_THAT(invalid_message([] { Variant("return s;", "", {{"t", VariantParamType::U8, 0}}); }),
             Catch::Contains("'t': a scalar of type u8"));
  CHECK_THAT(invalid_message([] { Variant("return s;", "", {{"t", VariantParamType::U8, 5}}); }),
             Catch::Contains("rank=5"));
  CHECK_THAT(invalid_message([] {
               Variant("return s;", "", {{"t", VariantParamType::U8, 1}, {"t_shape", VariantParamType::F32, 0}});
             }),
             Catch::Contains("'t_shape' is declared twice"));
  std::vector<VariantParam> many;
  for (int i = 0; i < 4; ++i) many.push_back({"t" + std::to_string(i), VariantParamType::F32, 4});  // 4 x 72 bytes
  CHECK_THAT(invalid_message([&] { Variant("return s;", "", many); }), Catch::Contains("at most 256 fit"));
}

TEST_CASE("binding params names the param, its dtype and rank", "[user_variant]") {
  Variant v(bias_table());
  DLTensorMaker bf16_2d({8, 33}, {kDLBfloat, 16, 1});
  DLTensorMaker f16_2d({8, 33}, {kDLFloat, 16, 1});
  DLTensorMaker bf16_1d({8}, {kDLBfloat, 16, 1});
  CHECK_THAT(invalid_message([&] { v.bind("bias", f16_2d.get()); }),
             Catch::Contains("'bias': dtype float16 is not allowed; declared bf16"));
  CHECK_THAT(invalid_message([&] { v.bind("bias", bf16_1d.get()); }),
             Catch::Contains("'bias': rank 1 is not allowed; declared rank 2"));
  CHECK_THAT(invalid_message([&] { v.bind("nope", bf16_2d.get()); }),
             Catch::Contains("'nope' is not declared; declared: bias, scale, zero"));
  CHECK_THAT(invalid_message([&] { v.bind("scale", int32_t(3)); }), Catch::Contains("'scale' is declared a f32 scalar"));
  CHECK_THAT(invalid_message([&] { v.bind("bias", 1.f); }), Catch::Contains("'bias' is declared a bf16 tensor"));
  DLTensorMaker host({8, 33}, {kDLBfloat, 16, 1}, {kDLCPU, 0});
  CHECK_THAT(invalid_message([&] { v.bind("bias", host.get()); }), Catch::Contains("not in CUDA device memory"));

  unsigned char blob[Variant::kMaxParamsBytes];
  v.bind("bias", bf16_2d.get());
  v.bind("scale", 0.5f);
  CHECK_THAT(invalid_message([&] { v.pack(blob, 0); }), Catch::Contains("'zero' (i32 scalar) is not bound"));
  v.bind("zero", int32_t(7));
  CHECK_THAT(invalid_message([&] { v.pack(blob, 1); }), Catch::Contains("'bias' is on cuda:0; this run is on cuda:1"));
  v.pack(blob, 0);

  // The layout the generated struct asserts: pointer, shape[2], stride[2], then the scalars.
  size_t bytes = 0;
  const auto slots = variant_param_layout(v.source(), &bytes);
  CHECK(bytes == 48);
  const void* ptr = nullptr;
  int64_t shape[2], stride[2];
  float scale = 0;
  int32_t zero = 0;
  std::memcpy(&ptr, blob + slots[0].offset, 8);
  std::memcpy(shape, blob + slots[0].shape_offset, 16);
  std::memcpy(stride, blob + slots[0].stride_offset, 16);
  std::memcpy(&scale, blob + slots[1].offset, 4);
  std::memcpy(&zero, blob + slots[2].offset, 4);
  CHECK(ptr == fake_device_pointer());
  CHECK((shape[0] == 8 && shape[1] == 33 && stride[0] == 33 && stride[1] == 1));
  CHECK(scale == 0.5f);
  CHECK(zero == 7);

  v.unbind("scale");
  CHECK_THAT(invalid_message([&] { v.pack(blob, 0); }), Catch::Contains("'scale' (f32 scalar) is not bound"));
}

TEST_CASE("a user variant is part of the spec's identity, name and JSON", "[user_variant]") {
  const PrefillKernel a = prefill_with(doc_mask()), same = prefill_with(doc_mask());
  VariantSource other_text = doc_mask();
  other_text.mask_mod += " ";
  VariantSource other_decl = doc_mask();
  other_decl.params[0].type = VariantParamType::I64;
  PrefillKernel plain = a;
  plain.variant.user = nullptr;

  CHECK(KernelSpec(a) == KernelSpec(same));
  CHECK(KernelSpec(a).identity() == KernelSpec(same).identity());
  CHECK(KernelSpec(a).name() == KernelSpec(same).name());
  CHECK(generate(a).source == generate(same).source);
  for (const auto& o : {prefill_with(other_text), prefill_with(other_decl), plain}) {
    CHECK(KernelSpec(a) != KernelSpec(o));
    CHECK(KernelSpec(a).identity() != KernelSpec(o).identity());
    CHECK(KernelSpec(a).name() != KernelSpec(o).name());
    CHECK(generate(a).source != generate(o).source);
  }
  CHECK_THAT(KernelSpec(a).name(), Catch::Contains("_user" + variant_source_digest(doc_mask())));
  CHECK_THAT(KernelSpec(plain).to_json().dump(), !Catch::Contains("user"));  // built-in specs keep their JSON

  const KernelSpec back = KernelSpec::from_json(KernelSpec(a).to_json());
  CHECK(back == KernelSpec(a));
  nlohmann::json bad = KernelSpec(a).to_json();
  bad["user"]["params"][0]["type"] = "f64";
  CHECK_THAT(invalid_message([&] { KernelSpec::from_json(bad); }), Catch::Contains("spec.user.params[0].type='f64'"));
  bad = KernelSpec(a).to_json();
  bad["user"]["extra"] = 1;
  CHECK_THAT(invalid_message([&] { KernelSpec::from_json(bad); }), Catch::Contains("spec.user.extra is not a field"));
}

TEST_CASE("a user variant's units compile with fast division; built-in units with the engine's options only",
          "[user_variant]") {
  const PrefillKernel user = prefill_with(bias_table());
  PrefillKernel plain = user;
  plain.variant.user = nullptr;
  CHECK(generate(user).options == std::vector<std::string>{"--prec-div=false"});
  CHECK(generate(BlockMaskKernel{std::make_shared<const VariantSource>(doc_mask())}).options ==
        std::vector<std::string>{"--prec-div=false"});
  CHECK(generate(plain).options.empty());
  // The option is part of the cache key: the same text compiled without it is another entry.
  TempCacheEngine t;
  const TranslationUnit tu = generate(user);
  TranslationUnit without = tu;
  without.options.clear();
  CHECK(make_cache_key(t.engine.key_inputs(tu, "sm_90a")) != make_cache_key(t.engine.key_inputs(without, "sm_90a")));
}

TEST_CASE("NVRTC messages at a snippet's lines map to the snippet", "[user_variant]") {
  std::string mapped;
  CHECK_FALSE(snippet_compile_error("prefill.cuh(12): error: something", &mapped));
  REQUIRE(snippet_compile_error("NVRTC 12.4 could not compile 'x.cu'\nscore_mod(3): error: expected a \";\"\n"
                                "    return s\n    ^\nprefill.cuh(300): here\n\n1 error detected",
                                &mapped));
  CHECK_THAT(mapped, Catch::Contains("score_mod line 3: error: expected a \";\""));
  CHECK_THAT(mapped, Catch::Contains("    return s"));
  CHECK_THAT(mapped, !Catch::Contains("prefill.cuh"));
}

TEST_CASE("a snippet that does not compile: INVALID_ARGUMENT at its line, nothing cached", "[user_variant][nvrtc]") {
  ATTNJIT_REQUIRE_NVRTC();
  TempCacheEngine temp;
  detail::Engine& engine = temp.engine;
  VariantSource broken;
  broken.score_mod = "float t = s;\nt = t * 2.f;\nreturn t +* ;\n";
  const KernelSpec spec = prefill_with(broken, MaskMode::None);
  const std::string msg = invalid_message([&] { engine.prepare(spec, "sm_80"); });
  CHECK_THAT(msg, Catch::Contains("score_mod line 3"));
  CHECK_THAT(msg, !Catch::Contains("mask_mod line"));
  const std::string key = engine.key_for(spec, "sm_80");
  CHECK_FALSE(fs::exists(engine.disk_cache().entry_path("sm_80", key)));
  CHECK(cubins_under(temp.dir.path() / "cache") == 0);

  VariantSource bad_mask = doc_mask();
  bad_mask.mask_mod = "return p.no_such_member == kv;";
  const std::string m2 = invalid_message([&] { engine.prepare(prefill_with(bad_mask), "sm_80"); });
  CHECK_THAT(m2, Catch::Contains("mask_mod line 1"));
  CHECK_THAT(m2, Catch::Contains("no_such_member"));

  // The same engine then compiles a good one, which is cached: the failures left no state behind.
  CHECK(engine.prepare(prefill_with(doc_mask()), "sm_80").origin == detail::Origin::Compiled);
  CHECK(cubins_under(temp.dir.path() / "cache") == 1);
}

TEST_CASE("NVRTC compiles snippet variants into every attention skeleton", "[user_variant][nvrtc]") {
  ATTNJIT_REQUIRE_NVRTC();
  TempCacheEngine temp;
  detail::Engine& engine = temp.engine;
  VariantSource both = bias_table();
  both.mask_mod = "return kv <= q + p.zero;";
  SECTION("fa2 prefill: mask_mod, score_mod with ALiBi and soft cap") {
    CHECK_NOTHROW(engine.prepare(prefill_with(doc_mask()), "sm_80"));
    PrefillKernel k = prefill_with(both);
    k.variant.pos_encoding = PosEncoding::Alibi;
    k.variant.soft_cap = true;
    k.window = true;
    k.kv_source = KVSource::Paged;
    CHECK_NOTHROW(engine.prepare(k, "sm_80"));
  }
  SECTION("fa3 prefill") {
    PrefillKernel k = prefill_with(both);
    k.backend = PrefillBackend::Fa3;
    k.head_dim = 128;
    CHECK_NOTHROW(engine.prepare(k, "sm_90a"));
  }
  SECTION("fa3_ws prefill: score_mod") {
    PrefillKernel k = prefill_with(bias_table(), MaskMode::None);
    k.backend = PrefillBackend::Fa3;
    k.warp_specialized = true;
    k.head_dim = 128;
    k.frags_m = 2;
    CHECK_NOTHROW(engine.prepare(k, "sm_90a"));
  }
  SECTION("decode: one token on CUDA cores and tensor cores, tokens x heads rows") {
    DecodeKernel d;
    d.head_dim = 128;
    d.variant.q_dtype = d.variant.kv_dtype = d.variant.o_dtype = DType::F16;
    d.variant.user = std::make_shared<const VariantSource>(both);
    CHECK_NOTHROW(engine.prepare(d, "sm_80"));
    DecodeKernel tc = d;
    tc.tensor_cores = true;
    tc.heads_per_cta = 4;
    CHECK_NOTHROW(engine.prepare(tc, "sm_80"));
    DecodeKernel rows = tc;
    rows.variant.mask = MaskMode::Causal;
    rows.tokens_per_cta = 2;
    CHECK_NOTHROW(engine.prepare(rows, "sm_80"));
  }
}

TEST_CASE("operators apply a variant to their kernels and pack it at run", "[user_variant]") {
  const auto mask = std::make_shared<const VariantSource>(doc_mask());
  const auto score = std::make_shared<const VariantSource>(bias_table());
  PrefillKernel k;
  ops::apply_user_variant(mask, false, false, k);
  CHECK(k.variant.mask == MaskMode::Custom);  // every tile tested
  CHECK(k.variant.user == mask);
  PrefillKernel s;
  s.variant.mask = MaskMode::Causal;
  ops::apply_user_variant(score, true, false, s);  // a score_mod keeps the built-in mask
  CHECK(s.variant.mask == MaskMode::Causal);
  PrefillKernel plain;
  ops::apply_user_variant(nullptr, true, false, plain);
  CHECK(plain.variant.user == nullptr);
  CHECK_THAT(invalid_message([&] { PrefillKernel x; ops::apply_user_variant(mask, true, false, x); }),
             Catch::Contains("causal=True with a variant's mask_mod"));
  CHECK_THAT(invalid_message([&] { PrefillKernel x; ops::apply_user_variant(mask, false, true, x); }),
             Catch::Contains("custom_mask with a variant's mask_mod"));
  PrefillKernel ws;
  ws.warp_specialized = true;
  ws.backend = PrefillBackend::Fa3;
  CHECK_NOTHROW(ops::apply_user_variant(mask, false, false, ws));  // each row tests its own head
  CHECK(ws.variant.mask == MaskMode::Custom);
  PrefillKernel ws_score = ws;
  ws_score.variant = {};
  CHECK_NOTHROW(ops::apply_user_variant(score, false, false, ws_score));

  DecodeKernel d;
  d.variant.mask = MaskMode::Causal;
  ops::apply_user_variant(mask, d);
  CHECK(d.variant.mask == MaskMode::Causal);
  DecodeKernel draft;
  draft.variant.mask = MaskMode::Draft;
  CHECK_THAT(invalid_message([&] { ops::apply_user_variant(mask, draft); }), Catch::Contains("draft-tree mask"));

  kernels::VariantParams var{};
  CHECK_NOTHROW(ops::pack_user_params(nullptr, nullptr, var, 0));
  Variant v(doc_mask());
  CHECK_THAT(invalid_message([&] { ops::pack_user_params(nullptr, &v, var, 0); }), Catch::Contains("made without one"));
  CHECK_THAT(invalid_message([&] { ops::pack_user_params(mask.get(), nullptr, var, 0); }),
             Catch::Contains("run() needs it"));
  CHECK_THAT(invalid_message([&] { ops::pack_user_params(score.get(), &v, var, 0); }),
             Catch::Contains("plan again for another variant"));
  CHECK_THAT(invalid_message([&] { ops::pack_user_params(mask.get(), &v, var, 0); }),
             Catch::Contains("'doc' (i32 tensor of rank 1) is not bound"));
  DLTensorMaker doc({37}, {kDLInt, 32, 1});
  v.bind("doc", doc.get());
  v.bind("q_offset", int32_t(5));
  ops::pack_user_params(mask.get(), &v, var, 0);
  int32_t q_offset = 0;
  std::memcpy(&q_offset, reinterpret_cast<const char*>(var.user_params) + 24, 4);
  CHECK(q_offset == 5);
}

}  // namespace attnjit::test

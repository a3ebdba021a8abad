// The C API of user variants on the CPU (attnjit_variant.h): creating one
// from snippets and a JSON declaration, binding its params, and giving it to
// an operator through the options struct; every bad input is refused with a
// message naming it, before any device is needed.
#include <catch2/catch.hpp>

#include <string>

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_batch_decode.h"
#include "attnjit/attnjit_variant.h"
#include "support/dltensor_maker.hpp"

using attnjit::test::DLTensorMaker;

namespace {

std::string last_error() { return attnjit_last_error(); }

struct Handle {
  attnjit_variant_t* v = nullptr;
  ~Handle() { attnjit_variant_destroy(v); }
};

}  // namespace

TEST_CASE("C API variant: create from snippets and a declaration; bad ones named", "[capi][user_variant]") {
  Handle h;
  REQUIRE(attnjit_variant_create(nullptr, "return p.doc_at(q) == p.doc_at(kv) && q - kv < p.w;",
                                 R"([{"name": "doc", "type": "i32", "rank": 1}, {"name": "w", "type": "i32"}])",
                                 &h.v) == ATTNJIT_OK);
  REQUIRE(h.v);

  attnjit_variant_t* bad = reinterpret_cast<attnjit_variant_t*>(1);
  CHECK(attnjit_variant_create(nullptr, nullptr, nullptr, &bad) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(bad == nullptr);  // nothing half-made is handed out
  CHECK_THAT(last_error(), Catch::Contains("score_mod") && Catch::Contains("mask_mod"));
  CHECK(attnjit_variant_create("return s;", nullptr, "[{", &bad) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("params_json is not JSON"));
  CHECK(attnjit_variant_create("return s;", nullptr, R"([{"name": "x", "type": "f64"}])", &bad) ==
        ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("variant.params[0].type"));
  CHECK(attnjit_variant_create("return s;", nullptr, R"({"name": "x"})", &bad) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("variant.params"));
  CHECK(attnjit_variant_create("return s;", nullptr, nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(attnjit_variant_destroy(nullptr) == ATTNJIT_OK);
}

TEST_CASE("C API variant: binding checks the declaration and names the param", "[capi][user_variant]") {
  Handle h;
  REQUIRE(attnjit_variant_create("return s + p.bias_at(h);", nullptr,
                                 R"([{"name": "bias", "type": "f32", "rank": 1}, {"name": "k", "type": "i32"}])",
                                 &h.v) == ATTNJIT_OK);
  DLTensorMaker bias({8}, {kDLFloat, 32, 1});
  CHECK(attnjit_variant_bind_tensor(h.v, "bias", bias.get()) == ATTNJIT_OK);
  CHECK(attnjit_variant_bind_i32(h.v, "k", 3) == ATTNJIT_OK);

  DLTensorMaker half({8}, {kDLFloat, 16, 1}), matrix({8, 8}, {kDLFloat, 32, 1});
  CHECK(attnjit_variant_bind_tensor(h.v, "bias", half.get()) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("'bias'") && Catch::Contains("dtype"));
  CHECK(attnjit_variant_bind_tensor(h.v, "bias", matrix.get()) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("'bias'") && Catch::Contains("rank 2"));
  DLTensorMaker host({8}, {kDLFloat, 32, 1}, {kDLCPU, 0});
  CHECK(attnjit_variant_bind_tensor(h.v, "bias", host.get()) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("CUDA"));
  CHECK(attnjit_variant_bind_f32(h.v, "k", 1.f) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("'k'"));
  CHECK(attnjit_variant_bind_i32(h.v, "nope", 1) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("nope"));
  CHECK(attnjit_variant_bind_i32(h.v, nullptr, 1) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(attnjit_variant_bind_i32(nullptr, "k", 1) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("attnjit_variant_create"));
}

TEST_CASE("C API variant: the options structs carry it; prefill refuses a mask_mod with causal=1, not on fa3_ws",
          "[capi][user_variant][prefill]") {
  attnjit_prefill_options_t po;
  attnjit_prefill_options_init(&po);
  CHECK(po.variant == nullptr);
  attnjit_decode_options_t dopt;
  attnjit_decode_options_init(&dopt);
  CHECK(dopt.variant == nullptr);
  attnjit_batch_decode_plan_options_t bo;
  attnjit_batch_decode_plan_options_init(&bo);
  CHECK(bo.variant == nullptr);

  attnjit_runtime_t* rt = nullptr;
  REQUIRE(attnjit_runtime_create(&rt) == ATTNJIT_OK);
  Handle h;
  REQUIRE(attnjit_variant_create(nullptr, "return kv <= q;", nullptr, &h.v) == ATTNJIT_OK);
  DLTensorMaker q({100, 8, 128}), k({100, 2, 128}), v({100, 2, 128}), o({100, 8, 128});
  po.variant = h.v;
  po.causal = 1;
  auto call = [&] {
    return attnjit_single_prefill_with_kv_cache(rt, q.get(), k.get(), v.get(), o.get(), nullptr, &po, nullptr, 0,
                                                nullptr, 0, nullptr);
  };
  CHECK(call() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("causal=True") && Catch::Contains("mask_mod"));
  po.causal = 0;
  po.backend = ATTNJIT_PREFILL_BACKEND_FA3_WS;
  CHECK_FALSE(call() == ATTNJIT_OK);  // no device here; fa3_ws takes a mask_mod, so no variant error
  CHECK_THAT(last_error(), !Catch::Contains("mask_mod"));
  // A struct from before the field (struct_size short of it): the variant is not read.
  po.struct_size = offsetof(attnjit_prefill_options_t, variant);
  po.causal = 1;
  po.backend = ATTNJIT_PREFILL_BACKEND_AUTO;
  CHECK_FALSE(call() == ATTNJIT_OK);  // no device here; what matters is that no variant error is raised
  CHECK_THAT(last_error(), !Catch::Contains("mask_mod"));
  attnjit_runtime_destroy(rt);
}

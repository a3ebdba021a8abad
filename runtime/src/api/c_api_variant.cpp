// attnjit_variant.h: create, bind and destroy a user variant.
#include "attnjit/attnjit_variant.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>

#include "api/c_api_guard.hpp"
#include "api/c_api_variant.hpp"
#include "attnjit/error.hpp"
#include "invalid_argument.hpp"
#include "spec/user_variant.hpp"

namespace {

using attnjit::invalid;

constexpr const char* kVariantHandle = "an attnjit_variant_t* from attnjit_variant_create";

attnjit::Variant& variant_of(attnjit_variant_t* v, const char* function) {
  attnjit::capi::require_non_null(v, function, "variant", kVariantHandle);
  return *v->variant;
}

std::string name_of(const char* name, const char* function) {
  if (!name) invalid(fmt::format("{}: name is NULL; allowed: a declared param's name", function));
  return name;
}

}  // namespace

extern "C" {

attnjit_status_t attnjit_variant_create(const char* score_mod, const char* mask_mod, const char* params_json,
                                        attnjit_variant_t** out) {
  return attnjit::capi::guard([&] {
    attnjit::capi::require_non_null(out, "attnjit_variant_create", "out", "an attnjit_variant_t** to fill");
    *out = nullptr;
    nlohmann::json j = nlohmann::json::object();
    if (score_mod) j["score_mod"] = score_mod;
    if (mask_mod) j["mask_mod"] = mask_mod;
    if (params_json && *params_json) {
      try {
        j["params"] = nlohmann::json::parse(params_json);
      } catch (const nlohmann::json::parse_error& e) {
        invalid(fmt::format("params_json is not JSON ({}); allowed: an array of {{\"name\": str, \"type\": str, "
                            "\"rank\": int}}",
                            e.what()));
      }
    }
    auto v = std::make_shared<attnjit::Variant>(attnjit::variant_source_from_json(j, "variant"));
    *out = new attnjit_variant_t{std::move(v)};
  });
}

attnjit_status_t attnjit_variant_create_from_json(const char* source_json, attnjit_variant_t** out) {
  return attnjit::capi::guard([&] {
    attnjit::capi::require_non_null(out, "attnjit_variant_create_from_json", "out", "an attnjit_variant_t** to fill");
    *out = nullptr;
    attnjit::capi::require_non_null(source_json, "attnjit_variant_create_from_json", "source_json",
                                    "a JSON object {\"score_mod\", \"mask_mod\", \"params\", \"block_sparse\", "
                                    "\"heads_vary\"}");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(source_json);
    } catch (const nlohmann::json::parse_error& e) {
      invalid(fmt::format("source_json is not JSON ({})", e.what()));
    }
    auto v = std::make_shared<attnjit::Variant>(attnjit::variant_source_from_json(j, "variant"));
    *out = new attnjit_variant_t{std::move(v)};
  });
}

attnjit_status_t attnjit_variant_bind_tensor(attnjit_variant_t* variant, const char* name, const DLTensor* tensor) {
  return attnjit::capi::guard([&] {
    const char* f = "attnjit_variant_bind_tensor";
    variant_of(variant, f).bind(name_of(name, f), tensor);
  });
}

attnjit_status_t attnjit_variant_bind_f32(attnjit_variant_t* variant, const char* name, float value) {
  return attnjit::capi::guard([&] {
    const char* f = "attnjit_variant_bind_f32";
    variant_of(variant, f).bind(name_of(name, f), value);
  });
}

attnjit_status_t attnjit_variant_bind_i32(attnjit_variant_t* variant, const char* name, int32_t value) {
  return attnjit::capi::guard([&] {
    const char* f = "attnjit_variant_bind_i32";
    variant_of(variant, f).bind(name_of(name, f), value);
  });
}

attnjit_status_t attnjit_variant_destroy(attnjit_variant_t* variant) {
  return attnjit::capi::guard([&] { delete variant; });
}

}  // extern "C"

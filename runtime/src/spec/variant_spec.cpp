#include "spec/variant_spec.hpp"

#include <fmt/format.h>

#include <string>

#include "attnjit/error.hpp"
#include "variant_params.h"
#include "spec/json_fields.hpp"
#include "spec/user_variant.hpp"

namespace attnjit {

const char* to_string(MaskMode m) noexcept {
  switch (m) {
    case MaskMode::None: return "none";
    case MaskMode::Causal: return "causal";
    case MaskMode::Custom: return "custom";
    case MaskMode::Draft: return "draft";
  }
  return "?";
}

const char* device_type(DType t) noexcept {
  switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::E4M3: return "e4m3";
    case DType::E5M2: return "e5m2";
  }
  return "?";
}

namespace {

MaskMode parse_mask(const std::string& s) {
  for (MaskMode m : {MaskMode::None, MaskMode::Causal, MaskMode::Custom, MaskMode::Draft})
    if (s == to_string(m)) return m;
  throw Error(Status::InvalidArgument, fmt::format("spec.mask='{}' is not a mask mode; allowed: none, causal, custom, draft", s));
}

// The device's own enum (kernels/variant_params.h), so host and kernels cannot drift.
int pos_mode_value(PosEncoding p) {
  switch (p) {
    case PosEncoding::None: return kernels::kPosNone;
    case PosEncoding::RopeLlama: return kernels::kPosRopeLlama;
    case PosEncoding::Alibi: return kernels::kPosAlibi;
  }
  return -1;
}

const char* pos_short(PosEncoding p) {
  return p == PosEncoding::None ? "none" : p == PosEncoding::RopeLlama ? "rope" : "alibi";
}

}  // namespace

std::string VariantSpec::name() const {
  return fmt::format("{}_{}_{}_{}{}{}{}", device_type(q_dtype), device_type(kv_dtype), device_type(o_dtype),
                     pos_short(pos_encoding), soft_cap ? "_softcap" : "",
                     mask == MaskMode::None ? "" : std::string("_") + to_string(mask),
                     user ? "_user" + variant_source_digest(*user) : "");
}

void VariantSpec::to_json(nlohmann::json& j) const {
  j["q_dtype"] = to_string(q_dtype);
  j["kv_dtype"] = to_string(kv_dtype);
  j["o_dtype"] = to_string(o_dtype);
  j["pos_encoding"] = to_string(pos_encoding);
  j["soft_cap"] = soft_cap;
  j["mask"] = to_string(mask);
  if (user) j["user"] = variant_source_json(*user);  // absent otherwise: built-in specs keep their JSON
}

VariantSpec VariantSpec::from_json(const nlohmann::json& j) {
  VariantSpec v;
  v.q_dtype = parse_dtype(spec_json::string_field(j, "q_dtype"), "spec.q_dtype");
  v.kv_dtype = parse_dtype(spec_json::string_field(j, "kv_dtype"), "spec.kv_dtype");
  v.o_dtype = parse_dtype(spec_json::string_field(j, "o_dtype"), "spec.o_dtype");
  v.pos_encoding = parse_pos_encoding(spec_json::string_field(j, "pos_encoding", "NONE"), "spec.pos_encoding");
  v.soft_cap = spec_json::bool_field(j, "soft_cap", false);
  v.mask = parse_mask(spec_json::string_field(j, "mask", "none"));
  if (j.contains("user")) v.user = std::make_shared<const VariantSource>(variant_source_from_json(j.at("user"), "spec.user"));
  return v;
}

std::vector<std::pair<std::string, std::string>> VariantSpec::template_values(bool with_mask) const {
  std::vector<std::pair<std::string, std::string>> v = {{"Q_TYPE", device_type(q_dtype)},
                                                        {"KV_TYPE", device_type(kv_dtype)},
                                                        {"O_TYPE", device_type(o_dtype)},
                                                        {"POS_MODE", std::to_string(pos_mode_value(pos_encoding))},
                                                        {"SOFT_CAP", soft_cap ? "true" : "false"}};
  if (with_mask) v.emplace_back("MASK_MODE", std::to_string(static_cast<int>(mask)));
  return v;
}

void VariantSpec::validate(const char* family) const {
  auto is16 = [](DType t) { return t == DType::F16 || t == DType::BF16; };
  auto is8 = [](DType t) { return t == DType::E4M3 || t == DType::E5M2; };
  // fp8 (e4m3) queries: the prefill family's warp-specialized kernel only
  // (PrefillKernel::validate checks the rest: K/V e4m3, a 16-bit output).
  const bool prefill = std::string(family) == "prefill";
  if (!is16(q_dtype) && !(prefill && q_dtype == DType::E4M3))
    throw Error(Status::InvalidArgument, fmt::format("{} spec.q_dtype={} is not supported; allowed: float16, bfloat16{}",
                                                     family, to_string(q_dtype), prefill ? ", float8_e4m3fn" : ""));
  if (q_dtype == DType::E4M3 && kv_dtype != DType::E4M3)
    throw Error(Status::InvalidArgument,
                fmt::format("{} spec.kv_dtype={} is not supported with q_dtype=float8_e4m3fn; allowed: float8_e4m3fn",
                            family, to_string(kv_dtype)));
  if (!is16(kv_dtype) && !is8(kv_dtype))
    throw Error(Status::InvalidArgument,
                fmt::format("{} spec.kv_dtype={} is not supported; allowed: float16, bfloat16, float8_e4m3fn, "
                            "float8_e5m2",
                            family, to_string(kv_dtype)));
  if (is16(kv_dtype) && kv_dtype != q_dtype)
    throw Error(Status::InvalidArgument,
                fmt::format("{} spec.kv_dtype={} must equal q_dtype={} for 16-bit KV", family, to_string(kv_dtype),
                            to_string(q_dtype)));
  if (!is16(o_dtype))
    throw Error(Status::InvalidArgument, fmt::format("{} spec.o_dtype={} is not supported; allowed: float16, bfloat16",
                                                     family, to_string(o_dtype)));
}

}  // namespace attnjit

#include "attnjit/types.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "enum_names.hpp"

namespace attnjit {

size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::F16: case DType::BF16: return 2;
    case DType::F32: return 4;
    case DType::E4M3: case DType::E5M2: return 1;
  }
  return 0;
}

const char* to_string(DType t) noexcept {
  static constexpr EnumName<DType> kNames[] = {
      {DType::F16, "float16"}, {DType::BF16, "bfloat16"}, {DType::F32, "float32"}, {DType::E4M3, "float8_e4m3fn"},
      {DType::E5M2, "float8_e5m2"}};
  return name_in(kNames, t);
}

const char* to_string(KVLayout l) noexcept { return l == KVLayout::NHD ? "NHD" : "HND"; }

const char* to_string(PosEncoding p) noexcept {
  static constexpr EnumName<PosEncoding> kNames[] = {
      {PosEncoding::None, "NONE"}, {PosEncoding::RopeLlama, "ROPE_LLAMA"}, {PosEncoding::Alibi, "ALIBI"}};
  return name_in(kNames, p);
}

DType parse_dtype(std::string_view s, std::string_view arg) {
  if (s == "float16" || s == "f16" || s == "fp16" || s == "half") return DType::F16;
  if (s == "bfloat16" || s == "bf16") return DType::BF16;
  if (s == "float32" || s == "f32" || s == "fp32") return DType::F32;
  if (s == "float8_e4m3fn" || s == "e4m3" || s == "fp8_e4m3") return DType::E4M3;
  if (s == "float8_e5m2" || s == "e5m2" || s == "fp8_e5m2") return DType::E5M2;
  throw Error(Status::InvalidArgument,
              fmt::format("{}='{}' is not a dtype; allowed: float16, bfloat16, float32, float8_e4m3fn, float8_e5m2", arg, s));
}

KVLayout parse_kv_layout(std::string_view s, std::string_view arg) {
  if (s == "NHD") return KVLayout::NHD;
  if (s == "HND") return KVLayout::HND;
  throw Error(Status::InvalidArgument, fmt::format("{}='{}' is not a KV layout; allowed: NHD, HND", arg, s));
}

PosEncoding parse_pos_encoding(std::string_view s, std::string_view arg) {
  if (s == "NONE") return PosEncoding::None;
  if (s == "ROPE_LLAMA") return PosEncoding::RopeLlama;
  if (s == "ALIBI") return PosEncoding::Alibi;
  throw Error(Status::InvalidArgument,
              fmt::format("{}='{}' is not a positional encoding; allowed: NONE, ROPE_LLAMA, ALIBI", arg, s));
}

}  // namespace attnjit

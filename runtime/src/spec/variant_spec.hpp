// The part of every attention kernel's spec that says which attention it
// computes (the variant), as opposed to how it is tiled: dtypes, positional
// encoding, soft cap and mask mode. Each kernel family embeds one and adds its
// own tiling fields; later families add what they need here once.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/types.hpp"
#include "attnjit/variant.hpp"

namespace attnjit {

// Which keys a query sees beyond the sequence itself. Decode needs none (its
// query is the last position; a window is a run-time value); speculative
// decoding's several tokens are causal, or follow TensorRT-LLM's draft-tree
// mask (Draft, decode only: kernels/mask.cuh).
enum class MaskMode : uint8_t { None, Causal, Custom, Draft };
const char* to_string(MaskMode m) noexcept;  // "none" / "causal" / "custom" / "draft"

struct VariantSpec {
  DType q_dtype = DType::F16;
  DType kv_dtype = DType::F16;
  DType o_dtype = DType::F16;
  PosEncoding pos_encoding = PosEncoding::None;
  bool soft_cap = false;
  MaskMode mask = MaskMode::None;
  // A user variant's snippets and params declaration (spec/user_variant.hpp),
  // or null. Its full text is in the JSON, so the identity and the cache key
  // carry it; the name gets its digest. With a mask_mod, `mask` only picks
  // which keys the skeleton visits and tests (mask.cuh): prefill plans Custom.
  std::shared_ptr<const VariantSource> user;

  // "bf16_e4m3_bf16_rope_softcap": the readable middle of a kernel name.
  std::string name() const;
  void to_json(nlohmann::json& j) const;  // adds its fields to a family's object
  static VariantSpec from_json(const nlohmann::json& j);
  // Q_TYPE, KV_TYPE, O_TYPE, POS_MODE, SOFT_CAP (and MASK_MODE where a family's template takes one).
  std::vector<std::pair<std::string, std::string>> template_values(bool with_mask) const;
  // Throws Error(InvalidArgument) naming the field when a value cannot be compiled.
  void validate(const char* family) const;

  bool operator==(const VariantSpec& o) const {
    return q_dtype == o.q_dtype && kv_dtype == o.kv_dtype && o_dtype == o.o_dtype && pos_encoding == o.pos_encoding &&
           soft_cap == o.soft_cap && mask == o.mask && (user == o.user || (user && o.user && *user == *o.user));
  }
};

// The device-side tag of a dtype in kernels/numeric.cuh ("bf16", "e4m3", ...).
const char* device_type(DType t) noexcept;

}  // namespace attnjit

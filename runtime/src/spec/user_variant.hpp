// The spec side of a user variant (attnjit/variant.hpp, issue 31): checking a
// declaration, its JSON form (part of a kernel's identity and cache key), the
// Params layout the host packs and the kernel reads, the generated device
// code, and NVRTC's messages mapped back to the snippets' own lines.
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "attnjit/variant.hpp"

namespace attnjit {

// Throws Error(InvalidArgument) naming the field (see Variant's constructor).
void validate_variant_source(const VariantSource& s);

nlohmann::json variant_source_json(const VariantSource& s);
// Validates every field; `where` prefixes the names in messages ("spec.user").
VariantSource variant_source_from_json(const nlohmann::json& j, const std::string& where);
// 12 hex digits of the SHA-256 of the canonical JSON: the readable tag in kernel names.
std::string variant_source_digest(const VariantSource& s);

// Where a param's members sit in the packed Params (8-byte aligned pointers
// and int64 shapes/strides in declaration order; 4-byte scalars).
struct VariantParamSlot {
  size_t offset = 0;         // the pointer, or the scalar
  size_t shape_offset = 0;   // tensors: int64_t[rank]
  size_t stride_offset = 0;  // tensors: int64_t[rank]
};
std::vector<VariantParamSlot> variant_param_layout(const VariantSource& s, size_t* total_bytes = nullptr);

// Device code placed before a kernel template's text: the feature macros,
// kernels/user_variant.cuh, struct Params (with static_asserts of the host's
// layout) and the snippets as attnjit::user::score_mod / mask_mod, each under
// `#line 1 "score_mod"` / "mask_mod"; `tu_name` restores the TU's own lines after them.
std::string variant_device_code(const VariantSource& s, const std::string& tu_name);

// A compile failure whose log names a snippet ("score_mod(3): error: ...")
// becomes Error(InvalidArgument) with those messages as "score_mod line 3: ...";
// any other message is returned unchanged (false).
bool snippet_compile_error(const std::string& nvrtc_message, std::string* mapped);

}  // namespace attnjit

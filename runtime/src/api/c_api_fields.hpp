// Readers of the fields the C options structs share (kv_layout,
// pos_encoding_mode, flags, window_left, "0 = not provided" floats): each
// refuses a bad value with a message naming `options-><field>`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "api/c_api_variant.hpp"
#include "attnjit/types.hpp"

namespace attnjit::capi {

KVLayout kv_layout_field(int32_t value);
PosEncoding pos_encoding_field(int32_t value);
bool flag_field(int32_t value, const char* field);
int window_left_field(int32_t value);
// A float where 0 means "not provided" (nullopt), as attnjit.h documents; not finite is refused.
std::optional<float> provided_field(float value, const char* field);
// An options struct's struct_size, set by its init function: at least the
// first layout's size and plausible, or an error naming `init`.
void check_struct_size(uint32_t have, size_t first_layout, size_t ours, const char* init);

// False for NULL (every default); else the caller's struct, whose struct_size
// check_struct_size accepted (first_layout: the end of its first version's fields).
template <class COptions>
bool given(const COptions* options, size_t first_layout, const char* init) {
  if (options == nullptr) return false;
  check_struct_size(options->struct_size, first_layout, sizeof(COptions), init);
  return true;
}

// The score fields the decode, batch decode plan and prefill structs share, in
// their order; 0 is "not provided".
template <class COptions, class Options>
void read_score_fields(const COptions& c, Options& o) {
  o.logits_soft_cap = provided_field(c.logits_soft_cap, "logits_soft_cap");
  o.sm_scale = provided_field(c.sm_scale, "sm_scale");
  o.rope_scale = provided_field(c.rope_scale, "rope_scale");
  o.rope_theta = provided_field(c.rope_theta, "rope_theta");
}

// variant, added in 0.4: read only where the caller's struct_size covers it.
template <class COptions, class Options>
void read_variant_field(const COptions& c, Options& o) {
  if (c.struct_size >= offsetof(COptions, variant) + sizeof(c.variant)) o.variant = variant_of(c.variant);
}

}  // namespace attnjit::capi

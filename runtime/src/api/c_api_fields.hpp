// Readers of the fields the C options structs share (kv_layout,
// pos_encoding_mode, flags, window_left, "0 = not provided" floats): each
// refuses a bad value with a message naming `options-><field>`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

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

}  // namespace attnjit::capi

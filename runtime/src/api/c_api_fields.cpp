#include "api/c_api_fields.hpp"

#include <fmt/format.h>

#include <cmath>

#include "attnjit/attnjit.h"
#include "attnjit/error.hpp"
#include "invalid_argument.hpp"

namespace attnjit::capi {

KVLayout kv_layout_field(int32_t value) {
  switch (value) {
    case ATTNJIT_KV_LAYOUT_NHD: return KVLayout::NHD;
    case ATTNJIT_KV_LAYOUT_HND: return KVLayout::HND;
  }
  invalid(fmt::format("options->kv_layout={} is not a layout; allowed: 0 (NHD), 1 (HND)", value));
}

PosEncoding pos_encoding_field(int32_t value) {
  switch (value) {
    case ATTNJIT_POS_ENCODING_NONE: return PosEncoding::None;
    case ATTNJIT_POS_ENCODING_ROPE_LLAMA: return PosEncoding::RopeLlama;
    case ATTNJIT_POS_ENCODING_ALIBI: return PosEncoding::Alibi;
  }
  invalid(fmt::format("options->pos_encoding_mode={} is not a positional encoding; "
                      "allowed: 0 (NONE), 1 (ROPE_LLAMA), 2 (ALIBI)",
                      value));
}

bool flag_field(int32_t value, const char* field) {
  if (value != 0 && value != 1) invalid(fmt::format("options->{}={} is not a flag; allowed: 0, 1", field, value));
  return value == 1;
}

int window_left_field(int32_t value) {
  if (value < -1)
    invalid(fmt::format("options->window_left={} is not allowed; allowed: -1 (whole sequence) or >= 0", value));
  return value;
}

std::optional<float> provided_field(float value, const char* field) {
  if (!std::isfinite(value))
    invalid(fmt::format("options->{}={} is not finite; allowed: a finite value, or 0 for the default", field, value));
  if (value == 0.0f) return std::nullopt;
  return value;
}

// struct_size tells a caller that skipped the init function (0 or garbage)
// apart; a later, longer layout is fine (fields past ours are not read) up to
// a sanity bound.
void check_struct_size(uint32_t have, size_t first_layout, size_t ours, const char* init) {
  if (have < first_layout || have > (1u << 16))
    invalid(fmt::format("options->struct_size={} is not a size this library knows (it is {}); call {} first", have,
                        ours, init));
}

}  // namespace attnjit::capi

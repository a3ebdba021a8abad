// C structs and DLTensors → the C++ API's types, validating everything the C
// side can get wrong (enum values, flags, non-finite floats, ranks and
// shapes that disagree) with messages that name the C parameter.
#pragma once
#include <optional>

#include "attnjit/attnjit.h"
#include "attnjit/prefill.hpp"
#include "attnjit/single_decode.hpp"
#include "attnjit/tensor.hpp"

namespace attnjit::capi {

// `options` NULL means all defaults. A float field of 0 means "not provided"
// (std::nullopt), as attnjit.h documents. struct_size must be set (by
// attnjit_decode_options_init); fields past it keep their defaults.
SingleDecodeOptions to_options(const attnjit_decode_options_t* options, bool return_lse);
// The same rules for attnjit_prefill_options_t.
PrefillOptions to_prefill_options(const attnjit_prefill_options_t* options, bool return_lse);

// options->scale_q / scale_k / scale_v as views (where struct_size covers
// them); scales() points into this object, so keep it while it is used.
struct PrefillScaleViews {
  std::optional<TensorView> views[3];
  bool any() const { return views[0] || views[1] || views[2]; }
  PrefillScales scales() const {
    auto at = [&](int i) { return views[i] ? &*views[i] : nullptr; };
    return PrefillScales{at(0), at(1), at(2)};
  }
};
PrefillScaleViews prefill_scales(const attnjit_prefill_options_t* options);

}  // namespace attnjit::capi

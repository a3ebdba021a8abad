// The C handle of a user variant (attnjit_variant.h): shared with the plans
// that take it, so destroying the handle never pulls values from under a plan.
#pragma once
#include <memory>

#include "attnjit/attnjit.h"
#include "attnjit/variant.hpp"

struct attnjit_variant {
  std::shared_ptr<attnjit::Variant> variant;
};

namespace attnjit::capi {

// The C++ variant behind an options struct's `variant` field (NULL: none).
inline std::shared_ptr<const Variant> variant_of(const attnjit_variant_t* v) {
  return v ? std::shared_ptr<const Variant>(v->variant) : nullptr;
}

}  // namespace attnjit::capi

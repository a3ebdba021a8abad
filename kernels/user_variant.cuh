// What a user variant's generated code (spec/user_variant.cpp) builds on: the
// element types of its f16 / bf16 tensor params, which read as float. The
// generated code defines attnjit::user::Params, score_mod and mask_mod after
// this header and before the skeleton's, and the ATTNJIT_USER_* macros that
// switch the variant hooks (variant.cuh, mask.cuh) to them.
#pragma once
#include "platform.cuh"
#include "variant_params.h"

#define ATTNJIT_USER_VARIANT 1

namespace attnjit {
namespace user {

struct f16_value {
  uint16_t bits;
  ATTNJIT_DEVICE operator float() const {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
  }
};

struct bf16_value {
  uint16_t bits;
  ATTNJIT_DEVICE operator float() const { return __uint_as_float(uint32_t(bits) << 16); }
};

}  // namespace user
}  // namespace attnjit

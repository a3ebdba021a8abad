// Which hooks a user variant's generated code replaces in this translation
// unit: it defines ATTNJIT_USER_SCORE_MOD / ATTNJIT_USER_MASK_MOD before any
// skeleton header, and the variant (variant.cuh) and mask (mask.cuh) read
// these flags, so a kernel without a user variant pays nothing. (Mask first:
// the cubin's symbol table keeps the order the two had before they met here.)
#pragma once

namespace attnjit {

#if defined(ATTNJIT_USER_MASK_MOD)
constexpr bool kUserMaskMod = true;
#else
constexpr bool kUserMaskMod = false;
#endif

#if defined(ATTNJIT_USER_SCORE_MOD)
constexpr bool kUserScoreMod = true;
#else
constexpr bool kUserScoreMod = false;
#endif

}  // namespace attnjit

// Which hooks a user variant's generated code replaces in this translation
// unit: it defines ATTNJIT_USER_SCORE_MOD / ATTNJIT_USER_MASK_MOD (and
// ATTNJIT_USER_BLOCK_SPARSE) before any
// skeleton header, and the variant (variant.cuh) and mask (mask.cuh) read
// these flags, so a kernel without a user variant pays nothing. (Mask first:
// the cubin's symbol table keeps the order the two had before they met here.)
#pragma once
#include "platform.cuh"

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

// A block-sparse mask_mod: the prefill skeletons walk only the KV tiles its
// classes keep and skip mask_mod on full ones (kv_tile_walk.cuh). A function,
// not a variable: a namespace-scope constant is a symbol in every cubin.
#if defined(ATTNJIT_USER_BLOCK_SPARSE)
ATTNJIT_HOST_DEVICE constexpr bool user_block_sparse() { return true; }
#else
ATTNJIT_HOST_DEVICE constexpr bool user_block_sparse() { return false; }
#endif

}  // namespace attnjit

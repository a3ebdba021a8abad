// Which (query, key) pairs attend: the mask half of the attention variant.
// Positions are absolute in the request's KV sequence; its qo_len queries end
// it, so query i sits at kv_len - qo_len + i (decode: the one query at kv_len - 1).
//
//   causal:  k_pos <= q_pos
//   custom:  bit (q_pos - (kv_len - qo_len)) * kv_len + k_pos of the request's
//            packed block (FlashInfer's order: little-endian within a byte)
//   window:  k_pos >= q_pos - window_left        (and with any mode)
//
// Mode and whether the window is checked are compile-time, so a variant
// without them pays nothing; window_left itself is a run-time value.
#pragma once
#include "platform.cuh"
#include "variant_params.h"

namespace attnjit {

template <int Mode, bool Window>
struct Mask {
  static_assert(Mode == kernels::kMaskNone || Mode == kernels::kMaskCausal || Mode == kernels::kMaskCustom,
                "unknown mask mode");

  int window_left;      // Window; < 0: none
  int first_q_pos;      // kMaskCustom: kv_len - qo_len, the position of block row 0
  int kv_len;           // kMaskCustom: block row length
  const uint8_t* bits;  // kMaskCustom: the request's block

  Mask() = default;
  ATTNJIT_DEVICE Mask(const kernels::VariantParams& p, int request, int qo_len, int kv_len_)
      : window_left(p.window_left), first_q_pos(kv_len_ - qo_len), kv_len(kv_len_), bits(nullptr) {
    if constexpr (Mode == kernels::kMaskCustom)
      bits = p.custom_mask + (p.custom_mask_indptr ? p.custom_mask_indptr[request] : 0);
  }

  ATTNJIT_DEVICE bool keep(int q_pos, int k_pos) const {
    bool ok = true;
    if constexpr (Mode == kernels::kMaskCausal) ok = k_pos <= q_pos;
    if constexpr (Mode == kernels::kMaskCustom) {
      const int64_t bit = int64_t(q_pos - first_q_pos) * kv_len + k_pos;
      ok = (bits[bit >> 3] >> (bit & 7)) & 1;
    }
    if constexpr (Window) ok = ok && (window_left < 0 || k_pos >= q_pos - window_left);
    return ok;
  }
};

// Nothing to check: no state at all, so a variant that masks nothing is
// exactly as large (and compiles exactly as) one without a mask.
template <>
struct Mask<kernels::kMaskNone, false> {
  Mask() = default;
  ATTNJIT_DEVICE Mask(const kernels::VariantParams&, int, int, int) {}
  ATTNJIT_DEVICE bool keep(int, int) const { return true; }
};

}  // namespace attnjit

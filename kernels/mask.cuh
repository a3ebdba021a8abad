// Which (query, key) pairs attend: the mask half of the attention variant.
// Positions are absolute in the request's KV sequence; its qo_len queries end
// it, so query i sits at kv_len - qo_len + i (decode: the one query at kv_len - 1).
//
//   causal:  k_pos <= q_pos
//   custom:  bit (q_pos - (kv_len - qo_len)) * kv_len + k_pos of the request's
//            packed block (FlashInfer's order: little-endian within a byte)
//   draft:   keys before the request's q_len query tokens always; key
//            first_q_pos + c for query token t: bit t * row_bits + c of the
//            request's rows (TensorRT-LLM's speculative-decoding mask, bound
//            by the decode skeletons: decode_queries.cuh, decode_row_variant)
//   window:  k_pos >= q_pos - window_left        (and with any mode)
//
// Mode and whether the window is checked are compile-time, so a variant
// without them pays nothing; window_left itself is a run-time value.
//
// A user mask_mod (ATTNJIT_USER_MASK_MOD, defined by a user variant's
// generated code) replaces the mode's own test, which the variant then asks
// instead (variant.cuh); the mode only tells the skeleton which keys to visit
// and test (custom: every tile), and the window still applies.
#pragma once
#include "platform.cuh"
#include "user_hooks.cuh"
#include "variant_params.h"

namespace attnjit {

// Keys first .. first + count - 1 (count >= 0; keys are >= 0, so k - first
// cannot wrap for a kept key and wraps past count for one before first).
struct KeyRun {
  int first, count;
  ATTNJIT_DEVICE bool has(int k) const { return unsigned(k - first) < unsigned(count); }
};

template <int Mode, bool Window>
struct Mask {
  static_assert(Mode == kernels::kMaskNone || Mode == kernels::kMaskCausal || Mode == kernels::kMaskCustom ||
                    Mode == kernels::kMaskDraft,
                "unknown mask mode");
  static constexpr int kMode = Mode;

  int window_left;      // Window; < 0: none
  int first_q_pos;      // kMaskCustom, kMaskDraft: kv_len - qo_len, the position of block row 0
  int kv_len;           // kMaskCustom: block row length; kMaskDraft: bits per row (bind_draft_rows)
  const uint8_t* bits;  // kMaskCustom, kMaskDraft: the request's block

  Mask() = default;
  ATTNJIT_DEVICE Mask(const kernels::VariantParams& p, int request, int qo_len, int kv_len_)
      : window_left(p.window_left), first_q_pos(kv_len_ - qo_len), kv_len(kv_len_), bits(nullptr) {
    if constexpr (Mode == kernels::kMaskCustom && !kUserMaskMod)
      bits = p.custom_mask + (p.custom_mask_indptr ? p.custom_mask_indptr[request] : 0);
  }
  // kMaskDraft: the request's rows (token 0's first) and their pitch in bits.
  ATTNJIT_DEVICE void bind_draft_rows(const uint8_t* rows, int row_bits) {
    bits = rows;
    kv_len = row_bits;
  }

  // Masks whose kept keys for a row are one run (no mode but causal, no
  // custom bits): keep() below kv_end as [first, first + count), tested by
  // KeyRun::has in one unsigned compare a score. Written as keep()'s chain
  // of tests, a causal window branched around every score (a BSSY / BSYNC
  // pair each) and spilled the warp-specialized consumers at 128-key tiles.
  static constexpr bool kRun = Mode == kernels::kMaskNone || Mode == kernels::kMaskCausal;
  ATTNJIT_DEVICE KeyRun keys_kept(int q_pos, int kv_end) const {
    int last = kv_end - 1;
    if constexpr (Mode == kernels::kMaskCausal && !kUserMaskMod) last = q_pos < last ? q_pos : last;
    int first = 0;
    if constexpr (Window) first = window_left < 0 || q_pos < window_left ? 0 : q_pos - window_left;
    return {first, last < first ? 0 : last - first + 1};  // (ternaries: host tests compile this too)
  }

  ATTNJIT_DEVICE bool keep(int q_pos, int k_pos) const {
    bool ok = true;
    if constexpr (Mode == kernels::kMaskCausal && !kUserMaskMod) ok = k_pos <= q_pos;
    if constexpr (Mode == kernels::kMaskCustom && !kUserMaskMod) {
      const int64_t bit = int64_t(q_pos - first_q_pos) * kv_len + k_pos;
      ok = (bits[bit >> 3] >> (bit & 7)) & 1;
    }
    if constexpr (Mode == kernels::kMaskDraft && !kUserMaskMod) {
      const int col = k_pos - first_q_pos;  // < 0: a key before the draft tokens, seen by every one
      if (col >= 0) {
        const int64_t bit = int64_t(q_pos - first_q_pos) * kv_len + col;
        ok = (bits[bit >> 3] >> (bit & 7)) & 1;
      }
    }
    if constexpr (Window) ok = ok && (window_left < 0 || k_pos >= q_pos - window_left);
    return ok;
  }
};

// Nothing to check: no state at all, so a variant that masks nothing is
// exactly as large (and compiles exactly as) one without a mask.
template <>
struct Mask<kernels::kMaskNone, false> {
  static constexpr int kMode = kernels::kMaskNone;
  Mask() = default;
  ATTNJIT_DEVICE Mask(const kernels::VariantParams&, int, int, int) {}
  static constexpr bool kRun = true;
  ATTNJIT_DEVICE KeyRun keys_kept(int, int kv_end) const { return {0, kv_end}; }
  ATTNJIT_DEVICE bool keep(int, int) const { return true; }
};

}  // namespace attnjit

// The attention variant of one query row of a decode CTA (a head, or a token
// x head: decode_queries.cuh). Every variant takes the row's head and its
// token's position; the draft-tree mask of speculative decoding
// (kMaskDraft) also gets the request's mask rows from the decode params,
// which the generic variant hooks do not see. A padding row (a token past
// the request's own, never stored) borrows the last token's mask row, so
// no row of another request, or past the mask, is read.
#pragma once
#include "decode_params.h"
#include "decode_queries.cuh"
#include "variant.cuh"

namespace attnjit {

template <class Variant, class Rows>
ATTNJIT_DEVICE Variant decode_row_variant(const kernels::VariantParams& var, const kernels::DecodeParams& p,
                                          const Rows& rows, int request, int r, int kv_len) {
  if constexpr (Variant::MaskT::kMode == kernels::kMaskDraft) {
    Variant v(var, request, rows.head(r), p.num_qo_heads, kv_len, rows.q_len, rows.mask_token(r));
    const int64_t row_words = p.draft_mask_row_words;
    v.mask.bind_draft_rows(reinterpret_cast<const uint8_t*>(p.draft_mask + rows.q_first * row_words),
                           int(row_words * 32));
    return v;
  } else {
    return Variant(var, request, rows.head(r), p.num_qo_heads, kv_len, rows.q_len, rows.token(r));
  }
}

}  // namespace attnjit

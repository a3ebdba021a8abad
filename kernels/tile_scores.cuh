// A prefill tile's scores through the variant (variant.cuh), the same for
// every tensor-core skeleton: S (map_tile's fragments) of the thread's two
// rows against keys base .. base + 8N, made logits, and masked where the
// tile can hold a masked pair (the skeleton knows: the sequence's edge, the
// diagonal, a window's start, a custom or user mask). A block mask's full
// tile keeps every pair mask_mod could drop: there the mask_mod is skipped.
//
// The choice between the two masks is made once a tile, outside the
// per-score code: taken per score it split the tile into 64 branches, and
// a mask_mod's tensor reads (a document id per query and key) could then
// be neither shared between scores nor issued together.
#pragma once
#include "fragment_softmax.cuh"
#include "mask.cuh"
#include "math.cuh"
#include "user_hooks.cuh"

namespace attnjit {

// The masked scores, with or without mask_mod (a template switch: no
// per-score choice). A mask_mod is evaluated at the key clamped into range
// and the range test applied after it, with no short-circuit: behind
// `j < kv_end &&` each score's snippet sat in a branch of its own, its
// tensor reads one round trip each (64 a tile a thread: the whole cost of a
// document mask's partial tiles); without it ptxas shares and batches them.
// A built-in mask keeps the short-circuit, and as this one expression: its
// custom mask's bit loads, issued together or the test moved into a
// function of its own, spilled the warp-specialized consumers (ptxas,
// 60-140 bytes).
// A kept score, or -inf. A score_mod runs on every pair, the masked ones at
// a key clamped below kv_end, and its result is then discarded: behind the
// mask's test its tensor reads (ALiBi's slope of the row's head) were one
// predicated load a score, which ptxas can neither share between scores nor
// hoist; unconditional, they are one load a row. Built-in scores stay behind
// the test (they read nothing).
template <class Variant>
ATTNJIT_DEVICE float kept_score(const Variant& var, float x, int j, int kv_end, bool kept) {
  if constexpr (kUserScoreMod) {
    const float v = var.score(x, j < kv_end ? j : kv_end - 1);
    return kept ? v : neg_inf();
  } else {
    return kept ? var.score(x, j) : neg_inf();
  }
}

template <bool MaskMod, int N, class Variant>
ATTNJIT_DEVICE void masked_scores(frag_c (&s)[N], const Variant (&var)[2], int base, int kv_end, const int (&pos)[2]) {
  // A causal / window mask (mask.cuh's KeyRun): each row's kept keys once, outside the per-score code.
  KeyRun runs[2];
  if constexpr (Variant::MaskT::kRun)
    for (int h = 0; h < 2; ++h) runs[h] = var[0].mask.keys_kept(pos[h], kv_end);
  map_tile(s, [&](int half, int col, float x) {
    const int j = base + col;
    const Variant& m = var[kUserMaskMod ? half : 0];
    if constexpr (kUserMaskMod && MaskMod) {
      const bool in_range = j < kv_end;
      return kept_score(var[half], x, j, kv_end, in_range & m.keep(pos[half], in_range ? j : kv_end - 1));
    } else if constexpr (Variant::MaskT::kRun) {
      return kept_score(var[half], x, j, kv_end, runs[half].has(j));
    } else if constexpr (kUserScoreMod) {
      return kept_score(var[half], x, j, kv_end,
                        j < kv_end && (MaskMod ? m.keep(pos[half], j) : m.keep_without_mask_mod(pos[half], j)));
    } else {  // one expression, as the comment above says
      return j < kv_end && (MaskMod ? m.keep(pos[half], j) : m.keep_without_mask_mod(pos[half], j))
                 ? var[half].score(x, j)
                 : neg_inf();
    }
  });
}

// var: each row's variant (a built-in mask is the request's, one for every
// head, so var[0]'s serves both rows; a mask_mod reads the head, each
// row's own); q_pos(half): a row's query position, read only for masking;
// keys at and past kv_end (> base) are masked.
template <int N, class Variant, class QPos>
ATTNJIT_DEVICE void score_tile(frag_c (&s)[N], const Variant (&var)[2], int base, int kv_end, bool need_mask,
                               bool tile_full, QPos&& q_pos) {
  if (need_mask) {
    const int pos[2] = {q_pos(0), q_pos(1)};
    if (tile_full) masked_scores<false>(s, var, base, kv_end, pos);
    else masked_scores<true>(s, var, base, kv_end, pos);
  } else if constexpr (!Variant::kLinearScore) {
    map_tile(s, [&](int half, int col, float x) { return var[half].score(x, base + col); });
  }
}

}  // namespace attnjit

// The attention variant: which keys a query sees, how q and k are transformed
// before the product, and how a raw dot product q.k becomes a base-2 logit.
// Kernel skeletons call only these hooks, so masks, rotary encodings, soft
// caps and biases never leak into the loop structure.
//
//   keep(q_pos, k_pos)                 mask.cuh: causal / custom / sliding window
//   transform_query, transform_key     RoPE (LLaMA) when PosMode asks for it
//   key_rotation                       the same for the keys at pos0, pos0 + step, ...
//   x = sm_scale * q.k                 (q_scale and k_scale folded into sm_scale)
//   x += slope_h * (j - q_pos)         (ALiBi)
//   x = cap * tanh(x / cap)            (soft cap)
//   logit = x * log2(e)                (softmax runs in base 2)
//   apply_sink                         TensorRT-LLM's sinks, on a head's final state
//
// A user variant (issue 31) compiles its snippets into the same hooks: its
// generated code defines ATTNJIT_USER_SCORE_MOD / ATTNJIT_USER_MASK_MOD and
// attnjit::user::{Params, score_mod, mask_mod} before this header.
//   keep:  the window && mask_mod(b, h, q, kv, params) (mask.cuh)
//   logit: x = score_mod(x, b, h, q, kv, params) after ALiBi, before the cap
// b is the request, h the query head, q the query's index among its
// request's queries (FlexAttention's convention), kv the key's position.
#pragma once
#include "mask.cuh"
#include "math.cuh"
#include "pos_encoding.cuh"
#include "softmax_state.cuh"
#include "user_hooks.cuh"
#include "variant_params.h"

namespace attnjit {

template <int PosMode, bool SoftCap, int MaskMode = kernels::kMaskNone, bool Window = false>
struct AttentionVariant {
  static constexpr bool kAlibi = PosMode == kernels::kPosAlibi;
  static constexpr bool kRope = PosMode == kernels::kPosRopeLlama;
  // With neither bias nor cap the whole transform is one multiply, folded
  // into q once instead of applied to every logit.
  static constexpr bool kFoldScaleIntoQ = !kAlibi && !SoftCap && !kUserScoreMod;
  // Whether transform_key changes a key: skeletons that can stage keys
  // without going through float (decode_mma.cuh) do so when it does not.
  static constexpr bool kTransformsKeys = kRope;
  using MaskT = Mask<MaskMode, Window>;

  float q_scale;      // multiplies q up front
  float alibi_slope;  // of this head
  float soft_cap, rcp_soft_cap;
  float q_pos;        // of this query in the KV sequence (decode: its only one, kv_len - 1)
  float rope_rcp_scale, rope_log2_theta;
  MaskT mask;
#if defined(ATTNJIT_USER_VARIANT)
  // By value: the fields a snippet reads become registers loaded once, so what
  // it derives from them (a reciprocal, a scaled offset) is hoisted out of the
  // per-score code; through a pointer they were reloaded for every score.
  user::Params user_params;
  int user_b, user_h, user_q0, user_q;  // request, query head, position of query 0, this row's query
#endif

  AttentionVariant() = default;
  // Query q_index (default: the last) of the qo_len queries that end the
  // kv_len keys of `request`, at head qo_head: it sits at kv_len - qo_len + q_index.
  ATTNJIT_DEVICE AttentionVariant(const kernels::VariantParams& p, int request, int qo_head, int num_qo_heads,
                                  int kv_len, int qo_len = 1, int q_index = -1)
      : q_scale(kFoldScaleIntoQ ? p.sm_scale * kLog2e : p.sm_scale),
        alibi_slope(kAlibi ? attnjit::alibi_slope(qo_head, num_qo_heads) : 0.f),
        soft_cap(p.soft_cap),
        rcp_soft_cap(SoftCap ? 1.f / p.soft_cap : 0.f),
        q_pos(float(kv_len - qo_len + (q_index < 0 ? qo_len - 1 : q_index))),
        rope_rcp_scale(p.rope_rcp_scale),
        rope_log2_theta(p.rope_log2_theta),
        mask(p, request, qo_len, kv_len) {
#if defined(ATTNJIT_USER_VARIANT)
    user_params = *reinterpret_cast<const user::Params*>(p.user_params);
    user_b = request;
    user_h = qo_head;
    user_q0 = kv_len - qo_len;
    user_q = q_index < 0 ? qo_len - 1 : q_index;
#endif
  }

  // (& rather than &&: a branch around mask_mod keeps its loads from being
  // shared and issued together: tile_scores.cuh.)
  ATTNJIT_DEVICE bool keep(int q_pos_, int k_pos) const {
    bool ok = mask.keep(q_pos_, k_pos);
#if defined(ATTNJIT_USER_MASK_MOD)
    ok = ok & user::mask_mod(user_b, user_h, q_pos_ - user_q0, k_pos, user_params);
#endif
    return ok;
  }
  // keep() less a mask_mod: on a block mask's full tiles (kv_tile_walk.cuh).
  ATTNJIT_DEVICE bool keep_without_mask_mod(int q_pos_, int k_pos) const { return mask.keep(q_pos_, k_pos); }

  // A thread's 8-wide slice (from dim0) of a query or key at position pos;
  // the slice's rotation partner is the lane partner_lane_xor away. Neither
  // may depend on the query head: a skeleton transforms a key once for all
  // the heads that share it.
  template <int HeadDim>
  ATTNJIT_DEVICE void transform_query(frag8& q, int pos, int dim0, int partner_lane_xor) const {
    if (kRope) rope_llama<HeadDim>(q, dim0, float(pos), partner_lane_xor, rope_rcp_scale, rope_log2_theta);
  }
  template <int HeadDim>
  ATTNJIT_DEVICE void transform_key(frag8& k, int pos, int dim0, int partner_lane_xor) const {
    if (kRope) rope_llama<HeadDim>(k, dim0, float(pos), partner_lane_xor, rope_rcp_scale, rope_log2_theta);
  }

  // transform_key for a thread's slice at positions pos0, pos0 + step, ...
  // in turn (rotate_and_step): for skeletons that stage several rows a
  // thread apart by a fixed step (decode_mma.cuh), at a fraction of the cost.
  // Width < 8: the walk of elements Lo .. Lo + Width of the slice only, dim0
  // their first dim (RotaryWalk::rotate_and_step<Lo>).
  template <int HeadDim, int Width = 8>
  ATTNJIT_DEVICE auto key_rotation(int pos0, int step, int dim0) const {
    if constexpr (kRope)
      return RotaryWalk<HeadDim, Width>(dim0, float(pos0), float(step), rope_rcp_scale, rope_log2_theta);
    else
      return NoRotation{};
  }

  // Tensor-core skeletons keep the raw product q.k and let the softmax
  // apply the scale in its exponent (fragment_softmax.cuh): score(q.k, j)
  // times exponent_scale() is the base-2 logit. A linear variant's score is
  // q.k itself, so an unmasked tile needs no pass over its scores at all.
  static constexpr bool kLinearScore = kFoldScaleIntoQ;
  ATTNJIT_DEVICE float exponent_scale() const { return kLinearScore ? q_scale : 1.f; }
  ATTNJIT_DEVICE float score(float qk, int j) const { return kLinearScore ? qk : logit(qk * q_scale, j); }

  // qk is the dot product of the pre-scaled q with k at row j.
  ATTNJIT_DEVICE float logit(float qk, int j) const {
    if (kFoldScaleIntoQ) return qk;
    float x = qk;
    if (kAlibi) x = fmaf(alibi_slope, float(j) - q_pos, x);
#if defined(ATTNJIT_USER_SCORE_MOD)
    x = user::score_mod(x, user_b, user_h, user_q, j, user_params);
#endif
    if (SoftCap) x = soft_cap * tanhf(x * rcp_soft_cap);
    return x * kLog2e;
  }
};

// TensorRT-LLM's attention sinks (VariantParams::sinks): per query head, a
// logit in the units of the scaled scores (natural log) that joins the
// softmax's denominator and contributes no value:
//   o = sum_j e^(x_j) v_j / (e^(sink_h) + sum_j e^(x_j)),  lse includes it.
// Applied once per output, to the state over the head's whole sequence:
// never to a split's partial state (the merge applies it instead).
ATTNJIT_DEVICE void apply_sink(SoftmaxState& s, const float* sinks, int qo_head) {
  if (sinks) s.add_sink(sinks[qo_head] * kLog2e);
}

}  // namespace attnjit

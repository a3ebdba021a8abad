// Run-time parameters of the attention variant (kernels/variant.cuh), shared
// by every kernel family: each family's params struct holds one of these, so
// scales, caps, RoPE and masks are filled and read the same way everywhere.
// Included by host and device code.
#pragma once
#include "platform.cuh"

namespace attnjit {
namespace kernels {

// Positional-encoding modes; values are part of the generated code's key.
enum PosEncodingMode : int32_t { kPosNone = 0, kPosRopeLlama = 1, kPosAlibi = 2 };

// Mask modes, a compile-time choice of the variant. Causal aligns the queries
// to the end of the KV sequence (query i of n sits at position kv_len - n + i).
// The sliding window is orthogonal: a run-time window_left, checked only by
// variants compiled to check it (decode instead starts each work item's rows
// at the window, decode_work.cuh, at no per-row cost).
// kMaskDraft: TensorRT-LLM's draft-tree mask of speculative decoding (mask.cuh).
enum MaskMode : int32_t { kMaskNone = 0, kMaskCausal = 1, kMaskCustom = 2, kMaskDraft = 3 };

// A user variant's Params (issue 31; generated per kernel, user_variant.cuh)
// travel by value in the kernel's parameters, so a captured graph holds them
// like every other run-time value and no device copy is managed. 8-byte words
// for the pointers and the int64 shapes and strides.
constexpr int kUserParamsWords = 32;

struct VariantParams {
  float sm_scale;         // softmax scale with q_scale * k_scale folded in
  float v_scale;          // applied to the output
  float soft_cap;         // > 0 only in soft-cap variants
  float rope_rcp_scale;   // 1 / rope_scale
  float rope_log2_theta;
  int32_t window_left;    // < 0: no sliding window; else keys in [q_pos - window_left, q_pos]
  const float* sinks;     // per qo head, or null: TensorRT-LLM's sinks (variant.cuh, apply_sink)
  // kMaskCustom: packed bits, FlashInfer's order (little-endian within a
  // byte; per request a row-major [qo_len, kv_len] block starting at byte
  // custom_mask_indptr[request], or at byte 0 when that is null).
  const uint8_t* custom_mask;
  const int32_t* custom_mask_indptr;
  // The user variant's packed Params (attnjit::Variant::pack); unread by other kernels.
  uint64_t user_params[kUserParamsWords];
};

}  // namespace kernels
}  // namespace attnjit

// Merging attention states computed over disjoint KV ranges (FlashInfer's
// flashinfer.cascade.merge_state, merge_state_in_place, merge_states):
//   S = log2(2^S_a + 2^S_b),   V = (2^S_a V_a + 2^S_b V_b) / 2^S
// with lse in base 2, as every attnjit operator returns it. Runs the
// state-merge kernel on the caller's stream; no workspace.
#pragma once
#include <cstdint>

#include "attnjit/runtime.hpp"
#include "attnjit/tensor.hpp"

namespace attnjit {

// v_a, v_b [seq, H, D] float16/bfloat16 with equal strides; s_a, s_b [seq, H]
// float32; v_merged [seq, H, D] contiguous in v's dtype; s_merged [seq, H] or null.
ATTNJIT_API void merge_state(const Runtime& rt, const TensorView& v_a, const TensorView& s_a, const TensorView& v_b,
                             const TensorView& s_b, const TensorView& v_merged, const TensorView* s_merged,
                             Stream stream);

// v, s updated in place with (v_other, s_other); `mask` (device bytes, one
// per sequence position, or null) leaves the positions whose byte is 0 as they are.
ATTNJIT_API void merge_state_in_place(const Runtime& rt, const TensorView& v, const TensorView& s,
                                      const TensorView& v_other, const TensorView& s_other, const uint8_t* mask,
                                      Stream stream);

// v [seq, num_states, H, D], s [seq, num_states, H] -> v_merged [seq, H, D], s_merged [seq, H] (or null).
ATTNJIT_API void merge_states(const Runtime& rt, const TensorView& v, const TensorView& s, const TensorView& v_merged,
                              const TensorView* s_merged, Stream stream);

}  // namespace attnjit

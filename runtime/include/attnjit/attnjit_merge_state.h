/* Merging attention states through attnjit's C API: FlashInfer's
 * flashinfer.cascade.merge_state, merge_state_in_place and merge_states.
 *
 * A state is the attention output V over a range of keys and its
 * log-sum-exp S, base 2 as every attnjit operator returns it. States of
 * disjoint ranges merge into the state of their union:
 *
 *     S = log2(2^S_a + 2^S_b),   V = (2^S_a V_a + 2^S_b V_b) / 2^S
 *
 * V tensors are float16 or bfloat16 with head_dim 64, 128 or 256, their last
 * dimension contiguous and 16-byte aligned; S tensors are float32. All in CUDA
 * memory on one device. Each call is one launch of the merge kernel on
 * `stream`, with no workspace; the first call for a (head_dim, dtype)
 * compiles or loads that kernel.
 *
 * Errors, handles and streams follow attnjit.h: a status code, the message
 * in attnjit_last_error() naming the argument, its value and what is
 * allowed. */
#ifndef ATTNJIT_MERGE_STATE_H_
#define ATTNJIT_MERGE_STATE_H_

#include "attnjit/attnjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* v_a, v_b [seq_len, num_heads, head_dim] with equal strides; s_a, s_b
 * [seq_len, num_heads] with equal strides. v_merged [seq_len, num_heads,
 * head_dim] in v_a's dtype with contiguous rows; s_merged [seq_len,
 * num_heads] contiguous, or NULL when the caller needs only V. */
ATTNJIT_API attnjit_status_t attnjit_merge_state(attnjit_runtime_t* rt, const DLTensor* v_a, const DLTensor* s_a,
                                                 const DLTensor* v_b, const DLTensor* s_b, DLTensor* v_merged,
                                                 DLTensor* s_merged, void* stream);

/* (v, s) becomes the merge of itself with (v_other, s_other): shapes as
 * attnjit_merge_state's a and b; v needs contiguous rows and s must be
 * contiguous (they are written). mask: NULL to merge every position, or
 * [seq_len] bytes on v's device, contiguous -- bool (DLPack's kDLBool, code 6,
 * as torch exports it), uint8 or int8 -- where a 0 leaves that position's
 * state as it is (FlashInfer's mask, for CUDA graphs of varying batches). */
ATTNJIT_API attnjit_status_t attnjit_merge_state_in_place(attnjit_runtime_t* rt, DLTensor* v, DLTensor* s,
                                                          const DLTensor* v_other, const DLTensor* s_other,
                                                          const DLTensor* mask, void* stream);

/* v [seq_len, num_states, num_heads, head_dim], s [seq_len, num_states,
 * num_heads] (any strides with a contiguous last dimension; num_states >= 1)
 * merge into v_merged [seq_len, num_heads, head_dim] (contiguous rows) and
 * s_merged [seq_len, num_heads] (contiguous, or NULL). */
ATTNJIT_API attnjit_status_t attnjit_merge_states(attnjit_runtime_t* rt, const DLTensor* v, const DLTensor* s,
                                                  DLTensor* v_merged, DLTensor* s_merged, void* stream);

#ifdef __cplusplus
}
#endif
#endif /* ATTNJIT_MERGE_STATE_H_ */

/* User attention variants through attnjit's C API (issue 31): a score_mod
 * and/or mask_mod written as the BODY of a CUDA device function, compiled by
 * NVRTC into the exact kernels of a plan and cached by hash:
 *
 *   float score_mod(float s, int b, int h, int q, int kv, const Params& p)
 *   bool  mask_mod(int b, int h, int q, int kv, const Params& p)
 *
 * s is sm_scale * q.k in natural-log units, the result the logit before
 * softmax; b the request (0 in the single calls), h the query head, q the
 * query's index among its request's queries, kv the key's index. p holds
 * the declared params: a tensor x of rank R as `const T* x; int64_t
 * x_shape[R]; int64_t x_stride[R];` and `x_at(i..)`, a scalar as `float x` or
 * `int32_t x`; a snippet reads them as p.x_at(i), p.x. The snippets are code run on the GPU with the caller's rights.
 *
 * Give a variant to an operator through its options struct's `variant`
 * field (attnjit_prefill_options_t, attnjit_decode_options_t,
 * attnjit_batch_decode_plan_options_t). A plan keeps a reference to the
 * variant (destroying the handle first is allowed) and reads its bound values
 * at each run: bind new values between runs, no new plan; not while a run
 * that uses it is being issued. Every declared param must be bound by the
 * first run. A snippet that does not compile fails the plan with
 * ATTNJIT_ERROR_INVALID_ARGUMENT and NVRTC's messages at the snippet's own
 * lines ("mask_mod line 2: ...").
 *
 * Errors, handles and streams follow attnjit.h. */
#ifndef ATTNJIT_VARIANT_H_
#define ATTNJIT_VARIANT_H_

#include "attnjit/attnjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* score_mod, mask_mod: the bodies (NULL or "" for none; not both).
 * params_json: the ordered declaration, a JSON array of
 * {"name": "doc", "type": "i32", "rank": 1} (types f16, bf16, f32, i32, u8,
 * i64 for tensors of rank 1..4; f32 or i32 for scalars, rank 0), or NULL /
 * "" for none. At most 256 bytes of Params. */
ATTNJIT_API attnjit_status_t attnjit_variant_create(const char* score_mod, const char* mask_mod,
                                                    const char* params_json, attnjit_variant_t** out);
/* The whole source as one JSON object: {"score_mod": str, "mask_mod": str,
 * "params": [...as above], "block_sparse": bool, "heads_vary": bool,
 * "reclassify": "each_run" | "on_bind"} (the form `attnjit explain --variant
 * FILE` and `attnjit prewarm --variant FILE` read). block_sparse (needs a
 * mask_mod; single prefill, and the ragged and paged batch prefill wrappers
 * with b the request): every (query tile, KV tile) of the plan is classified
 * by mask_mod on the GPU, then the kernel skips the empty tiles and
 * evaluates mask_mod only on the partial ones. heads_vary false promises
 * that mask_mod does not read h (one classification for every head; the
 * output is wrong if it does). Decode, and the batch wrappers in CUDA-graph
 * mode, refuse block_sparse with ATTNJIT_ERROR_UNSUPPORTED.
 * reclassify (default "each_run"; "on_bind" needs block_sparse; any other
 * value is ATTNJIT_ERROR_INVALID_ARGUMENT naming "variant.reclassify"):
 * "each_run": each run classifies first, into the run's workspace, so the
 * classes follow the values of that run, a tensor param rewritten in place
 * included, and a captured graph replays the classification. "on_bind": a
 * plan keeps its classes (a copy per stream, at most 4 streams, in memory of
 * the plan's own) and classifies again only when the variant was bound
 * (attnjit_variant_bind_*) since that copy was made; no host sync. Not seen
 * then: a tensor param rewritten in place without a new bind. A run on a
 * capturing stream (or a fifth stream) classifies as "each_run" does; a
 * captured graph replays what its capture did. The run's variant decides,
 * not the plan's: both policies share kernels and plans. */
ATTNJIT_API attnjit_status_t attnjit_variant_create_from_json(const char* source_json, attnjit_variant_t** out);
/* A declared tensor param: a DLTensor in CUDA memory of its type and rank
 * (strides in elements; NULL strides mean contiguous). The tensor is not
 * copied: it must stay alive while runs that read it execute. */
ATTNJIT_API attnjit_status_t attnjit_variant_bind_tensor(attnjit_variant_t* variant, const char* name,
                                                         const DLTensor* tensor);
ATTNJIT_API attnjit_status_t attnjit_variant_bind_f32(attnjit_variant_t* variant, const char* name, float value);
ATTNJIT_API attnjit_status_t attnjit_variant_bind_i32(attnjit_variant_t* variant, const char* name, int32_t value);
/* Plans made with it keep what they need; NULL is allowed. */
ATTNJIT_API attnjit_status_t attnjit_variant_destroy(attnjit_variant_t* variant);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* ATTNJIT_VARIANT_H_ */

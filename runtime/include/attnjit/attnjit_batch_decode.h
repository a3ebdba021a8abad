/* Paged batch decode through attnjit's C API (docs/BATCH_DECODE.md).
 *
 * Three entry points, as in FlashInfer:
 *  - the BatchDecodeWithPagedKVCacheWrapper, a plan handle made once
 *    (attnjit_batch_decode_wrapper_create), planned per step with the
 *    indptr / indices / last_page_len page table on the host, run per layer
 *    (_v2 adds programmatic dependent launch);
 *  - attnjit_trtllm_batch_decode_with_kv_cache (block tables + seq_lens;
 *    _v2 adds attention sinks and programmatic dependent launch, _v3
 *    speculative decoding's query lengths and device-tensor scales);
 *  - attnjit_cudnn_batch_decode_with_kv_cache (block tables + actual_seq_lens_kv;
 *    _v2 adds cuDNN's ragged batch offsets of q and out).
 *
 * The KV cache is a pair of 4-D tensors k_cache, v_cache ([pages, page_size,
 * kv_heads, head_dim] for NHD, [pages, kv_heads, page_size, head_dim] for
 * HND); where a function says so, v_cache may be NULL and k_cache the 5-D
 * single-tensor form [pages, 2, ...] (K at [:, 0], V at [:, 1]), or for
 * TensorRT-LLM's entry [pages, 1, ...] (K and V the same tensor).
 * Index arrays are int32 DLTensors (seq_lens may also be uint32).
 *
 * Errors, handles and options structs follow attnjit.h: a status code, the
 * message in attnjit_last_error(), struct_size set by the _init function, a
 * NULL options pointer meaning the defaults. */
#ifndef ATTNJIT_BATCH_DECODE_H_
#define ATTNJIT_BATCH_DECODE_H_

#include "attnjit/attnjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The wrapper's constructor arguments besides the buffers. */
typedef struct attnjit_batch_decode_wrapper_options {
  uint32_t struct_size;     /* set by init */
  int32_t kv_layout;        /* attnjit_kv_layout_t; default NHD */
  int32_t use_cuda_graph;   /* 0 or 1; default 0 */
  int32_t use_tensor_cores; /* 0 or 1; default 0 */
  int32_t device;           /* CUDA ordinal of the workspace and the cache; default 0 */
} attnjit_batch_decode_wrapper_options_t;

/* plan()'s optional arguments. A float left at 0 means "not provided". */
typedef struct attnjit_batch_decode_plan_options {
  uint32_t struct_size;      /* set by init */
  int32_t pos_encoding_mode; /* attnjit_pos_encoding_t; default NONE */
  int32_t window_left;       /* -1: whole sequence */
  DLDataType q_data_type;    /* default float16 {kDLFloat, 16, 1}; fp8 codes as attnjit_fp8.h */
  DLDataType kv_data_type;   /* bits 0 (the init value): q_data_type */
  float logits_soft_cap;     /* 0: no capping */
  float sm_scale;            /* 0: 1/sqrt(head_dim) */
  float rope_scale, rope_theta;
  /* Added in 0.4 (older headers: NULL): a user variant (attnjit_variant.h),
   * or NULL; b is the request, q its query token. */
  const attnjit_variant_t* variant;
} attnjit_batch_decode_plan_options_t;

/* trtllm_batch_decode_with_kv_cache's optional arguments. */
typedef struct attnjit_trtllm_decode_options {
  uint32_t struct_size;             /* set by init */
  int32_t kv_layout;                /* default HND, as TensorRT-LLM */
  int32_t window_left;              /* -1: whole sequence */
  int32_t uses_shared_paged_kv_idx; /* 1: block_tables [batch, max_pages]; 0: [batch, 2, max_pages] (K, V) */
  int32_t use_tensor_cores;         /* 0 or 1; default 0 */
  float bmm1_scale;                 /* the whole softmax scale; default 1.0, must be > 0 (_v3: unused when
                                       its bmm1_scale tensor is given) */
  float bmm2_scale;                 /* multiplies the output; default 1.0, must be > 0 (likewise) */
} attnjit_trtllm_decode_options_t;

ATTNJIT_API void attnjit_batch_decode_wrapper_options_init(attnjit_batch_decode_wrapper_options_t* options);
/* As attnjit_decode_options_init_sized (attnjit.h): the macro passes the
 * caller's sizeof; the function writes the layout before user variants. */
ATTNJIT_API void attnjit_batch_decode_plan_options_init_sized(attnjit_batch_decode_plan_options_t* options,
                                                               uint32_t struct_size);
ATTNJIT_API void attnjit_batch_decode_plan_options_init(attnjit_batch_decode_plan_options_t* options);
#define attnjit_batch_decode_plan_options_init(options) \
  attnjit_batch_decode_plan_options_init_sized((options), (uint32_t)sizeof(*(options)))
ATTNJIT_API void attnjit_trtllm_decode_options_init(attnjit_trtllm_decode_options_t* options);

/* A wrapper: an attnjit_plan_t of operator "batch_decode" (destroy it with
 * attnjit_plan_destroy; rt must outlive it). float_workspace_buffer (device
 * memory, 256-byte aligned, on options->device) and, with use_cuda_graph,
 * the three fixed int32 device buffers stay the caller's and must outlive
 * the handle: paged_kv_indptr_buffer [max_batch_size + 1],
 * paged_kv_indices_buffer [max_num_pages], paged_kv_last_page_len_buffer
 * [max_batch_size] (sizes are read from their shapes). Without
 * use_cuda_graph the three must be NULL. A handle is not thread-safe: plan
 * and run it from one thread at a time. */
ATTNJIT_API attnjit_status_t attnjit_batch_decode_wrapper_create(
    attnjit_runtime_t* rt, void* float_workspace_buffer, size_t workspace_bytes,
    const attnjit_batch_decode_wrapper_options_t* options, const DLTensor* paged_kv_indptr_buffer,
    const DLTensor* paged_kv_indices_buffer, const DLTensor* paged_kv_last_page_len_buffer, attnjit_plan_t** out);

/* indptr [batch + 1], indices [at least indptr[batch]: the rest is ignored], last_page_len [batch]: int32,
 * 1-D, contiguous, in host memory (kDLCPU or kDLCUDAHost); validated here and
 * copied to the device on `stream`. Not while `stream` captures a graph.
 * Afterwards attnjit_plan_workspace_bytes / _describe report this plan.
 * float_workspace_buffer must hold the plan's scratch
 * (ATTNJIT_ERROR_WORKSPACE_TOO_SMALL otherwise, as FlashInfer's plan). */
ATTNJIT_API attnjit_status_t attnjit_batch_decode_wrapper_plan(attnjit_plan_t* wrapper, const DLTensor* indptr,
                                                               const DLTensor* indices, const DLTensor* last_page_len,
                                                               int num_qo_heads, int num_kv_heads, int head_dim,
                                                               int page_size,
                                                               const attnjit_batch_decode_plan_options_t* options,
                                                               void* stream);

/* FlashInfer's workspace_size(): what attnjit_batch_decode_wrapper_plan
 * with these arguments would need, without planning. *float_workspace_bytes:
 * the scratch it needs of float_workspace_buffer (what
 * attnjit_plan_workspace_bytes reports after that plan; the plan refuses a
 * smaller float workspace with ATTNJIT_ERROR_WORKSPACE_TOO_SMALL naming
 * float_workspace_buffer). *int_workspace_bytes: the plan memory it fills
 * (what attnjit_plan_int_workspace_bytes reports after it; what a buffer
 * given to attnjit_plan_set_int_workspace must hold). The plan call's checks
 * and errors; nothing is allocated, uploaded or compiled, and the wrapper's
 * current plan is untouched (a run after this call runs it). Reads the
 * device's figures (SM count), so the device must be present. */
ATTNJIT_API attnjit_status_t attnjit_batch_decode_wrapper_workspace_bytes(
    const attnjit_plan_t* wrapper, const DLTensor* indptr, const DLTensor* indices, const DLTensor* last_page_len,
    int num_qo_heads, int num_kv_heads, int head_dim, int page_size,
    const attnjit_batch_decode_plan_options_t* options, size_t* float_workspace_bytes, size_t* int_workspace_bytes);

/* q [batch, num_qo_heads, head_dim]; out likewise in q's dtype; lse
 * [batch, num_qo_heads] float32 (base 2) or NULL. v_cache NULL: k_cache is
 * the 5-D cache. k_scale / v_scale: 0 means not provided (1), else > 0.
 * Only launches: graph-capturable. */
ATTNJIT_API attnjit_status_t attnjit_batch_decode_wrapper_run(const attnjit_plan_t* wrapper, const DLTensor* q,
                                                              const DLTensor* k_cache, const DLTensor* v_cache,
                                                              DLTensor* out, DLTensor* lse, float k_scale,
                                                              float v_scale, void* stream);

/* attnjit_batch_decode_wrapper_run with programmatic dependent launch, as
 * FlashInfer's run(enable_pdl=...): -1 the library's default (on for sm_90
 * and newer, as FlashInfer's None), 0 off, 1 on (an error below sm_90).
 * attnjit_batch_decode_wrapper_run launches without it. */
ATTNJIT_API attnjit_status_t attnjit_batch_decode_wrapper_run_v2(const attnjit_plan_t* wrapper, const DLTensor* q,
                                                                 const DLTensor* k_cache, const DLTensor* v_cache,
                                                                 DLTensor* out, DLTensor* lse, float k_scale,
                                                                 float v_scale, int enable_pdl, void* stream);

/* TensorRT-LLM's batch decode. query [batch, num_qo_heads, head_dim];
 * v_cache NULL: k_cache is the 5-D cache; block_tables int32 on query's
 * device, contiguous, [batch, max_pages] or (uses_shared_paged_kv_idx = 0)
 * [batch, 2, max_pages]; seq_lens int32/uint32 [batch] on the device (not
 * read by the host: the kernels check a length above max_seq_len and a page
 * id past the cache, see attnjit_runtime_check in attnjit.h).
 * out [batch, num_qo_heads, head_dim] (its dtype is the output dtype); lse
 * [batch, num_qo_heads] float32 or NULL (an attnjit extension). The
 * workspace is the caller's (128 MiB covers any sane problem). */
ATTNJIT_API attnjit_status_t attnjit_trtllm_batch_decode_with_kv_cache(
    attnjit_runtime_t* rt, const DLTensor* query, const DLTensor* k_cache, const DLTensor* v_cache, void* workspace,
    size_t workspace_bytes, const DLTensor* block_tables, const DLTensor* seq_lens, int64_t max_seq_len,
    const attnjit_trtllm_decode_options_t* options, DLTensor* out, DLTensor* lse, void* stream);

/* attnjit_trtllm_batch_decode_with_kv_cache with TensorRT-LLM's two launch
 * extras (attnjit_trtllm_batch_decode_with_kv_cache is this with sinks NULL
 * and enable_pdl -1). They are parameters of a new function, not fields
 * appended to attnjit_trtllm_decode_options_t: its init function writes the
 * library's sizeof, which a caller built against the shorter struct could
 * not hold.
 *  - sinks: NULL (none) or float32 [num_qo_heads], contiguous, on the
 *    query's device: one logit per qo head, in the units of the scaled
 *    scores (bmm1_scale applied), joining that head's softmax denominator as
 *    e^sink with no value. lse includes it.
 *  - enable_pdl: programmatic dependent launch. -1: the library's default,
 *    on for sm_90 and newer; 0: off; 1: on (sm_90+, else
 *    ATTNJIT_ERROR_UNSUPPORTED). The output is the same either way. */
ATTNJIT_API attnjit_status_t attnjit_trtllm_batch_decode_with_kv_cache_v2(
    attnjit_runtime_t* rt, const DLTensor* query, const DLTensor* k_cache, const DLTensor* v_cache, void* workspace,
    size_t workspace_bytes, const DLTensor* block_tables, const DLTensor* seq_lens, int64_t max_seq_len,
    const attnjit_trtllm_decode_options_t* options, const DLTensor* sinks, int enable_pdl, DLTensor* out,
    DLTensor* lse, void* stream);

/* attnjit_trtllm_batch_decode_with_kv_cache_v2 with speculative decoding
 * and device-tensor scales (_v2 is this with q_len_per_req 1, max_q_len 0
 * and NULL tensors). New parameters, not options fields, for the reason _v2
 * gives.
 *  - q_len_per_req >= 1: query tokens per request (draft tokens to verify).
 *    query, out and lse then have one row per token, [num_tokens,
 *    num_qo_heads, head_dim] with num_tokens = batch * q_len_per_req, request
 *    b's token t at row b * q_len_per_req + t; the batch is num_tokens /
 *    q_len_per_req (num_tokens must be a multiple of it). Token t of a
 *    request of KV length L sits at position L - q_len + t and sees keys
 *    [0, L - q_len + t] (and its window): causal among the request's tokens.
 *  - max_q_len, cum_seq_lens_q: per-request query lengths, given together
 *    (max_q_len 0 and cum_seq_lens_q NULL: none). cum_seq_lens_q int32
 *    [batch + 1] on the query's device, request b's tokens at rows
 *    cum_seq_lens_q[b] .. cum_seq_lens_q[b+1], at most max_q_len (1 to 64) of
 *    them; the batch is then seq_lens' length, and num_tokens at most
 *    batch * max_q_len. q_len_per_req is 1 or max_q_len. The values are not
 *    read by the host: the kernels check each request's pair of entries (a
 *    first row in q, at most max_q_len rows, ending within q), compute and
 *    write nothing for a request that fails, and report the first bad entry
 *    as a bad seq_lens is (attnjit_runtime_check in attnjit.h).
 *  - bmm1_scale, bmm2_scale: NULL (options->bmm1_scale / bmm2_scale), or one
 *    float32 (shape [] or [1]) on the query's device that replaces the float:
 *    the whole softmax scale, and the output's factor. The kernels read it
 *    when they run, so a CUDA graph captured once replays with whatever
 *    value the tensor holds at replay; the host never reads it (its value is
 *    not checked: it must be finite and > 0, like the float's).
 * At most 64 tokens per request; more than one per request runs on tensor
 * cores at head_dim 64 and 128 (whatever options->use_tensor_cores says), on
 * CUDA cores at 256 and 512. */
ATTNJIT_API attnjit_status_t attnjit_trtllm_batch_decode_with_kv_cache_v3(
    attnjit_runtime_t* rt, const DLTensor* query, const DLTensor* k_cache, const DLTensor* v_cache, void* workspace,
    size_t workspace_bytes, const DLTensor* block_tables, const DLTensor* seq_lens, int64_t max_seq_len,
    const attnjit_trtllm_decode_options_t* options, const DLTensor* sinks, int enable_pdl, int q_len_per_req,
    int max_q_len, const DLTensor* cum_seq_lens_q, const DLTensor* bmm1_scale, const DLTensor* bmm2_scale,
    DLTensor* out, DLTensor* lse, void* stream);

/* attnjit_trtllm_batch_decode_with_kv_cache_v3 with TensorRT-LLM's `mask`,
 * the draft-tree mask of speculative decoding (_v3 is this with mask NULL:
 * the request's tokens are causal among themselves).
 *  - mask: NULL, or uint16 on the query's device, contiguous, FlashInfer's
 *    bit-packed rows: [batch, q_len_per_req, words] or, with cum_seq_lens_q,
 *    [num_tokens, words], one row per query token row, words an even number
 *    of uint16 (32-bit words, ((max tokens + 31) / 32) * 2 in FlashInfer);
 *    32-bit (uint32/int32) words are taken too. Bit c of token t's row (word
 *    c / 32, bit c % 32, little-endian) set: t sees its request's draft token
 *    c, at position L - q_len + c; every token sees the keys before the draft
 *    tokens (and its window). Needs q_len_per_req or max_q_len >= 2. The bits
 *    are device data the host does not read.
 * The single-tensor cache (v_cache NULL) of the TensorRT-LLM functions may be
 * [pages, 2, ...] or, as FlashInfer accepts, [pages, 1, ...]: K and V are
 * then the same tensor. */
ATTNJIT_API attnjit_status_t attnjit_trtllm_batch_decode_with_kv_cache_v4(
    attnjit_runtime_t* rt, const DLTensor* query, const DLTensor* k_cache, const DLTensor* v_cache, void* workspace,
    size_t workspace_bytes, const DLTensor* block_tables, const DLTensor* seq_lens, int64_t max_seq_len,
    const attnjit_trtllm_decode_options_t* options, const DLTensor* sinks, int enable_pdl, int q_len_per_req,
    int max_q_len, const DLTensor* cum_seq_lens_q, const DLTensor* bmm1_scale, const DLTensor* bmm2_scale,
    const DLTensor* mask, DLTensor* out, DLTensor* lse, void* stream);

/* cuDNN's batch decode: q [batch, num_qo_heads, head_dim]; k_cache, v_cache
 * [pages, num_kv_heads, page_size, head_dim] (HND); scale > 0;
 * actual_seq_lens_kv int32/uint32 on the device, [batch] or [batch, 1, 1, 1];
 * block_tables int32 [batch, max_pages] on the device; out like q. */
ATTNJIT_API attnjit_status_t attnjit_cudnn_batch_decode_with_kv_cache(
    attnjit_runtime_t* rt, const DLTensor* q, const DLTensor* k_cache, const DLTensor* v_cache, float scale,
    void* workspace, size_t workspace_bytes, int64_t max_sequence_kv, const DLTensor* actual_seq_lens_kv,
    const DLTensor* block_tables, DLTensor* out, void* stream);

/* attnjit_cudnn_batch_decode_with_kv_cache with cuDNN's ragged batch offsets
 * of the query and the output (attnjit_cudnn_batch_decode_with_kv_cache is
 * this with both NULL), FlashInfer's batch_offsets_q / batch_offsets_o.
 *  - batch_offsets_q, batch_offsets_o: NULL (none: request b's row at
 *    b * stride(0), as in the first function), or int32 on q's device, 1-D,
 *    contiguous, of batch_size entries or batch_size + 1 (cuDNN's cumulative
 *    form, e.g. FlashInfer's arange(0, batch_size + 1) * num_qo_heads *
 *    head_dim; only the first batch_size entries are read). batch_size is
 *    q's shape[0]. Entry b is the offset, in elements of q (resp. out), not
 *    bytes, from q's (out's) data pointer (byte_offset applied) to request
 *    b's row; head h of that row is at that offset + h * stride(1). The two
 *    are independent: either may be NULL.
 *  - The offsets are device data the host does not read: the kernels check
 *    each (0 to (batch_size - 1) * stride(0), a multiple of 16 bytes), and a
 *    request whose row would leave q (out), or is misaligned, is neither
 *    computed nor written; the first such offset is reported as a bad block
 *    table is (attnjit_runtime_check in attnjit.h). Output rows that overlap
 *    give unspecified results.
 * cuDNN's batch_offsets_k / batch_offsets_v have no parameter: they address
 * a non-paged cache, and this function takes K and V as pages through
 * block_tables. */
ATTNJIT_API attnjit_status_t attnjit_cudnn_batch_decode_with_kv_cache_v2(
    attnjit_runtime_t* rt, const DLTensor* q, const DLTensor* k_cache, const DLTensor* v_cache, float scale,
    void* workspace, size_t workspace_bytes, int64_t max_sequence_kv, const DLTensor* actual_seq_lens_kv,
    const DLTensor* block_tables, const DLTensor* batch_offsets_q, const DLTensor* batch_offsets_o, DLTensor* out,
    void* stream);

#ifdef __cplusplus
}
#endif
#endif /* ATTNJIT_BATCH_DECODE_H_ */

/* attnjit's C API: opaque handles, status codes, DLPack tensors.
 *
 * No exception crosses this boundary. Every function returns an
 * attnjit_status_t; on failure attnjit_last_error() gives this thread's
 * detailed message (naming the argument, its value and what is allowed).
 * Tensors are DLPack DLTensor* in CUDA device memory; streams are CUstream
 * (cudaStream_t) passed as void*, NULL meaning the legacy default stream. */
#ifndef ATTNJIT_H_
#define ATTNJIT_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "attnjit/export.h"
#include "attnjit/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attnjit_status {
  ATTNJIT_OK = 0,
  ATTNJIT_ERROR_INVALID_ARGUMENT = 1,
  ATTNJIT_ERROR_UNSUPPORTED = 2,
  ATTNJIT_ERROR_NO_DEVICE = 3,
  ATTNJIT_ERROR_CUDA = 4,
  ATTNJIT_ERROR_COMPILE = 5,
  ATTNJIT_ERROR_CACHE = 6,
  ATTNJIT_ERROR_CACHE_MISS = 7,
  ATTNJIT_ERROR_NOT_PLANNED = 8,
  ATTNJIT_ERROR_WORKSPACE_TOO_SMALL = 9,
  ATTNJIT_ERROR_INTERNAL = 10
} attnjit_status_t;

typedef enum attnjit_kv_layout { ATTNJIT_KV_LAYOUT_NHD = 0, ATTNJIT_KV_LAYOUT_HND = 1 } attnjit_kv_layout_t;
typedef enum attnjit_pos_encoding {
  ATTNJIT_POS_ENCODING_NONE = 0,
  ATTNJIT_POS_ENCODING_ROPE_LLAMA = 1,
  ATTNJIT_POS_ENCODING_ALIBI = 2
} attnjit_pos_encoding_t;

typedef struct attnjit_runtime attnjit_runtime_t;
/* A plan of any operator: made by attnjit_<op>_plan, run by attnjit_<op>_run,
 * inspected and destroyed by the attnjit_plan_* functions below. */
typedef struct attnjit_plan attnjit_plan_t;
typedef attnjit_plan_t attnjit_single_decode_plan_t; /* the 0.1 name */

/* A user variant (score_mod / mask_mod snippets and their params):
 * attnjit_variant.h. */
typedef struct attnjit_variant attnjit_variant_t;

/* Options of single_decode_with_kv_cache. Call attnjit_decode_options_init
 * first; a float left at 0 means "not provided" (FlashInfer's defaults).
 * struct_size comes first and is set by the init function, so fields can be
 * added at the end without breaking callers compiled against an older
 * header: the library reads only the fields the caller's struct has, and
 * the init macro passes the caller's sizeof, so it writes only those too. */
typedef struct attnjit_decode_options {
  uint32_t struct_size;       /* sizeof(attnjit_decode_options_t), set by init */
  int32_t kv_layout;          /* attnjit_kv_layout_t */
  int32_t pos_encoding_mode;  /* attnjit_pos_encoding_t */
  int32_t use_tensor_cores;   /* 0 or 1 */
  int32_t window_left;        /* -1: whole sequence */
  float q_scale, k_scale, v_scale;
  float logits_soft_cap;
  float sm_scale;
  float rope_scale, rope_theta;
  /* Added in 0.4 (callers built against older headers get NULL): a user
   * variant (attnjit_variant.h), or NULL. */
  const attnjit_variant_t* variant;
} attnjit_decode_options_t;

/* Options of single_prefill_with_kv_cache, like attnjit_decode_options_t:
 * call attnjit_prefill_options_init first; a float left at 0 means "not
 * provided" (FlashInfer's default). allow_fp16_qk_reduction (FlashInfer's
 * use_fp16_qk_reduction) must be 0: q.k always accumulates in fp32, and 1 is
 * UNSUPPORTED. The batch wrappers take their backend at creation instead. */
typedef struct attnjit_prefill_options {
  uint32_t struct_size;              /* sizeof(attnjit_prefill_options_t), set by init */
  int32_t causal;                    /* 0 or 1; ignored with a custom mask */
  int32_t kv_layout;                 /* attnjit_kv_layout_t */
  int32_t pos_encoding_mode;         /* attnjit_pos_encoding_t */
  int32_t allow_fp16_qk_reduction;   /* 0 or 1 */
  int32_t window_left;               /* -1: whole sequence */
  float logits_soft_cap;
  float sm_scale;
  float rope_scale, rope_theta;
  /* Added in 0.3 (callers built against older headers get 0, "auto"). */
  int32_t backend;                   /* attnjit_prefill_backend_t */
  /* Added in 0.4 (older headers: NULL): a user variant (attnjit_variant.h),
   * or NULL. A mask_mod is refused with causal=1 or a custom mask. */
  const attnjit_variant_t* variant;
  /* Added for fp8 prefill (older headers: bits 0 and NULL, read only where
   * struct_size covers them). o_dtype: the output's dtype where no o tensor
   * gives it (attnjit_single_prefill_workspace_bytes, the batch prefill
   * wrapper's plan and workspace_bytes); bits 0: q's. float8_e4m3fn q (with
   * e4m3 k and v, head_dim 128, sm_90a) writes float16 or bfloat16, so it
   * needs one. attnjit_single_prefill_with_kv_cache takes o's dtype (an
   * o_dtype given there must equal it). */
  DLDataType o_dtype;
  /* fp8 q's per-head dequantization scales (FlashInfer's scale_q / scale_k /
   * scale_v; attnjit_single_prefill_with_kv_cache only, NULL elsewhere):
   * float32 1-D contiguous on q's device, scale_q [num_qo_heads], scale_k and
   * scale_v [num_kv_heads]; NULL: ones. UNSUPPORTED with 16-bit q. */
  const DLTensor* scale_q;
  const DLTensor* scale_k;
  const DLTensor* scale_v;
} attnjit_prefill_options_t;

/* Prefill kernels: AUTO picks FA3 (Hopper warpgroup MMA) on sm_90 with 16-bit
 * K/V, else FA2 (mma.sync, every arch from sm_80). */
typedef enum attnjit_prefill_backend {
  ATTNJIT_PREFILL_BACKEND_AUTO = 0,
  ATTNJIT_PREFILL_BACKEND_FA2 = 1,
  ATTNJIT_PREFILL_BACKEND_FA3 = 2,
  /* The warp-specialized Hopper skeleton (TMA/gather producer, ping-ponged
   * consumer warpgroups), asked for by name until AUTO picks it. */
  ATTNJIT_PREFILL_BACKEND_FA3_WS = 3,
} attnjit_prefill_backend_t;

ATTNJIT_API const char* attnjit_version(void);          /* "0.1.0" */
ATTNJIT_API int attnjit_version_number(void);           /* ATTNJIT_VERSION_NUMBER of the loaded library */
ATTNJIT_API const char* attnjit_status_string(attnjit_status_t status); /* static text */
ATTNJIT_API const char* attnjit_last_error(void);       /* this thread's last message; "" if none */
/* ATTNJIT_OK when the loaded library serves callers compiled against this
 * header: call attnjit_check_version(ATTNJIT_ABI_VERSION) once at start-up.
 * ATTNJIT_ERROR_UNSUPPORTED (with a message naming both) otherwise. */
ATTNJIT_API attnjit_status_t attnjit_check_version(int header_abi_version);

/* Configuration comes from the environment (ATTNJIT_CACHE_DIR, ...). */
ATTNJIT_API attnjit_status_t attnjit_runtime_create(attnjit_runtime_t** out);
ATTNJIT_API attnjit_status_t attnjit_runtime_destroy(attnjit_runtime_t* rt);

/* Sets the defaults of the first struct_size bytes (at most this library's
 * layout) and struct_size to what it covered: the init for any header's
 * layout. attnjit_decode_options_init(o) is a macro calling it with the
 * caller's sizeof; the function of that name, which callers compiled against
 * headers before user variants call, writes that older layout only. */
ATTNJIT_API void attnjit_decode_options_init_sized(attnjit_decode_options_t* options, uint32_t struct_size);
ATTNJIT_API void attnjit_decode_options_init(attnjit_decode_options_t* options);
#define attnjit_decode_options_init(options) \
  attnjit_decode_options_init_sized((options), (uint32_t)sizeof(*(options)))

/* Plan once (compiles/loads kernels, sizes the workspace), run many times.
 * q, k, v here only describe shapes and dtypes (data pointers unused). */
ATTNJIT_API attnjit_status_t attnjit_single_decode_plan(attnjit_runtime_t* rt, const DLTensor* q,
                                                        const DLTensor* k, const DLTensor* v,
                                                        const attnjit_decode_options_t* options, int return_lse,
                                                        attnjit_plan_t** out);
ATTNJIT_API attnjit_status_t attnjit_single_decode_plan_workspace_bytes(const attnjit_plan_t* plan, size_t* out);
/* Launches on `stream` only: no allocation, no synchronization (graph-capturable). */
ATTNJIT_API attnjit_status_t attnjit_single_decode_run(const attnjit_plan_t* plan, const DLTensor* q,
                                                       const DLTensor* k, const DLTensor* v,
                                                       DLTensor* o, DLTensor* lse, void* workspace,
                                                       size_t workspace_bytes, void* stream);
ATTNJIT_API attnjit_status_t attnjit_single_decode_plan_destroy(attnjit_plan_t* plan); /* = attnjit_plan_destroy */

/* Every plan, whatever its operator.
 *
 * Memory. A run()'s workspace (attnjit_plan_workspace_bytes) is scratch: the
 * partial states of a KV split, written and read within that run, so plans
 * may share one workspace as long as their runs are ordered (one stream).
 * What a stateful plan (the batch decode and prefill wrappers) uploads at
 * plan() and reads at every run() lives in memory it owns: allocated by the
 * library at the first plan() (never while capturing; freed when the plan is
 * destroyed, after the device is idle), or the caller's buffer given with
 * attnjit_plan_set_int_workspace (FlashInfer's int_workspace_buffer), which
 * must hold attnjit_plan_int_workspace_bytes after each plan(). In CUDA-graph
 * mode that memory keeps its address across plans, so a captured run replays
 * whatever the latest plan() uploaded. */
ATTNJIT_API attnjit_status_t attnjit_plan_workspace_bytes(const attnjit_plan_t* plan, size_t* out);
/* The plan memory the last plan() filled (0 before; 0 for plans without). */
ATTNJIT_API attnjit_status_t attnjit_plan_int_workspace_bytes(const attnjit_plan_t* plan, size_t* out);
/* Use `buffer` (device, 256-byte aligned, on the plan's device, outliving the
 * plan) as the plan memory instead of the library's own; plan() again
 * afterwards. INVALID_ARGUMENT for a plan that keeps none. */
ATTNJIT_API attnjit_status_t attnjit_plan_set_int_workspace(attnjit_plan_t* plan, void* buffer, size_t bytes);
/* A stateful plan's new scratch workspace (FlashInfer's
 * reset_workspace_buffer); the current plan stays valid if it fits. */
ATTNJIT_API attnjit_status_t attnjit_plan_set_float_workspace(attnjit_plan_t* plan, void* buffer, size_t bytes);
/* Device tables. Page tables and lengths that live on the device (block
 * tables, seq_lens, a wrapper's page table as the kernels read it, which a
 * caller may overwrite between CUDA-graph replays, append_paged_kv_cache's
 * tables) are checked by the kernels without a sync: an entry outside what
 * the plan allows (a page id past the cache, a length past max_seq_len, an
 * indptr outside the table) reads nothing outside the cache, and the first
 * is reported as ATTNJIT_ERROR_INVALID_ARGUMENT naming the array, the index
 * and the value at the next plan or run of that plan (for the one-call entry
 * points: the next TensorRT-LLM / cuDNN batch decode or append call on that
 * device), or by these functions. The request it belongs to has a void
 * output; the others' stay right. With ATTNJIT_CHECK=1 in the environment
 * every such run waits for its stream and reports at once.
 *
 * attnjit_plan_check waits for the plan's device, then reports what a run of
 * the plan met (ATTNJIT_OK for a plan whose kernels read no device table).
 * attnjit_runtime_check does the same for the one-call entry points on
 * `device`. */
ATTNJIT_API attnjit_status_t attnjit_plan_check(const attnjit_plan_t* plan);
ATTNJIT_API attnjit_status_t attnjit_runtime_check(attnjit_runtime_t* rt, int device);
/* "single_decode", ...: a static string, or NULL for a NULL plan. */
ATTNJIT_API const char* attnjit_plan_operator(const attnjit_plan_t* plan);
/* The kernels, grid and split the plan chose, as text: writes at most
 * `capacity` bytes (NUL-terminated) to buf and the full length + 1 to
 * *needed (when not NULL), like snprintf; buf may be NULL to ask the size. */
ATTNJIT_API attnjit_status_t attnjit_plan_describe(const attnjit_plan_t* plan, char* buf, size_t capacity,
                                                   size_t* needed);
ATTNJIT_API attnjit_status_t attnjit_plan_destroy(attnjit_plan_t* plan);

/* Plan (memoized) + run. lse may be NULL; workspace may be NULL (the runtime's own). */
ATTNJIT_API attnjit_status_t attnjit_single_decode_with_kv_cache(attnjit_runtime_t* rt, const DLTensor* q,
                                                                 const DLTensor* k, const DLTensor* v,
                                                                 DLTensor* o, DLTensor* lse,
                                                                 const attnjit_decode_options_t* options,
                                                                 void* workspace, size_t workspace_bytes, void* stream);

/* As attnjit_decode_options_init_sized: the macro passes the caller's sizeof;
 * the function writes the layout before user variants (up to backend). */
ATTNJIT_API void attnjit_prefill_options_init_sized(attnjit_prefill_options_t* options, uint32_t struct_size);
ATTNJIT_API void attnjit_prefill_options_init(attnjit_prefill_options_t* options);
#define attnjit_prefill_options_init(options) \
  attnjit_prefill_options_init_sized((options), (uint32_t)sizeof(*(options)))

/* Prefill / append attention of one request (plan memoized, then run):
 * q [qo_len, H_qo, D]; k, v [kv_len, H_kv, D] (NHD) or [H_kv, kv_len, D] (HND);
 * o [qo_len, H_qo, D] contiguous, in q's dtype, or float16 / bfloat16 for
 * float8_e4m3fn q, k and v (the output's dtype is o's; per-head scales in
 * options->scale_q / scale_k / scale_v); lse [qo_len, H_qo] float32 or NULL (base 2).
 * packed_custom_mask: device bytes of the bit-packed [qo_len, kv_len] mask
 * (FlashInfer's order: little-endian within a byte), or NULL for none.
 * workspace may be NULL (the runtime's own). */
ATTNJIT_API attnjit_status_t attnjit_single_prefill_with_kv_cache(
    attnjit_runtime_t* rt, const DLTensor* q, const DLTensor* k, const DLTensor* v, DLTensor* o, DLTensor* lse,
    const attnjit_prefill_options_t* options, const void* packed_custom_mask, size_t packed_custom_mask_bytes,
    void* workspace, size_t workspace_bytes, void* stream);

/* The workspace bytes the call above needs for these tensors and options
 * (0: none), from the same memoized plan (it compiles on first use).
 * return_lse / has_custom_mask: 1 when the call will pass lse / a mask. A
 * caller that allocates this much stream-ordered (torch's allocator,
 * cudaMallocAsync) and passes it keeps the call capturable in a CUDA graph;
 * with workspace NULL the runtime leases its own, which capture refuses. */
ATTNJIT_API attnjit_status_t attnjit_single_prefill_workspace_bytes(
    attnjit_runtime_t* rt, const DLTensor* q, const DLTensor* k, const DLTensor* v,
    const attnjit_prefill_options_t* options, int return_lse, int has_custom_mask, size_t* out);

/* Deprecated (kept for one release): the batch prefill handle of 0.2. Use
 * attnjit_batch_prefill_wrapper_* (attnjit_batch_prefill.h), an
 * attnjit_plan_t; these are thin shims over it, with the same memory
 * contract (the workspace is scratch; the arrays live in the wrapper's own
 * memory). qk_indptr_buf is FlashInfer's mask_indptr_buf. */
typedef struct attnjit_batch_prefill attnjit_batch_prefill_t;
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_create(attnjit_runtime_t* rt, int paged, void* workspace,
                                                          size_t workspace_bytes, int32_t kv_layout,
                                                          const char* backend, int device,
                                                          attnjit_batch_prefill_t** out);
/* attnjit_batch_prefill_create with FlashInfer's CUDA-graph mode
 * (use_cuda_graph 1; 0 is attnjit_batch_prefill_create and every buffer
 * must be NULL). The buffers are the caller's, int32 (custom_mask_buf:
 * uint8) 1-D contiguous on `device`, and must outlive the handle; plan()
 * copies the index arrays into them, so a run() captured in a CUDA graph
 * replays the latest plan. qo_indptr_buf and kv_indptr_buf (the paged
 * wrapper's paged_kv_indptr_buf) [max_batch_size + 1]; paged only, and then
 * required: paged_kv_indices_buf [max_num_pages], paged_kv_last_page_len_buf
 * [max_batch_size]; custom_mask_buf [max mask bytes] and qk_indptr_buf
 * [max_batch_size + 1] together or neither (plans with a custom mask need
 * them). The launch is fixed (one wave of persistent CTAs, no KV split);
 * q and o may have more rows than a plan uses, and a plan may not use more
 * rows or pages than a run() so far was given. */
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_create_v2(
    attnjit_runtime_t* rt, int paged, void* workspace, size_t workspace_bytes, int32_t kv_layout, const char* backend,
    int device, int use_cuda_graph, const DLTensor* qo_indptr_buf, const DLTensor* kv_indptr_buf,
    const DLTensor* paged_kv_indices_buf, const DLTensor* paged_kv_last_page_len_buf, const DLTensor* custom_mask_buf,
    const DLTensor* qk_indptr_buf, attnjit_batch_prefill_t** out);
/* Host arrays: qo_indptr and kv_indptr (ragged: rows; paged: pages) have
 * batch_size + 1 entries; paged only: page_indices (num_page_indices) and
 * last_page_len (batch_size), page_size. custom_mask: host bytes (0 / 1) of
 * FlashInfer's flattened mask, or NULL. options->kv_layout is ignored (the
 * wrapper's). q_dtype, kv_dtype: "float16", "bfloat16" (kv_dtype NULL: q's). */
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_plan(
    attnjit_batch_prefill_t* w, const int32_t* qo_indptr, const int32_t* kv_indptr, size_t batch_size,
    const int32_t* page_indices, size_t num_page_indices, const int32_t* last_page_len, int page_size,
    int num_qo_heads, int num_kv_heads, int head_dim, const attnjit_prefill_options_t* options, const char* q_dtype,
    const char* kv_dtype, const uint8_t* custom_mask, size_t custom_mask_len, void* stream);
/* ragged: k, v [nnz_kv, H_kv, D] (NHD) or [H_kv, nnz_kv, D]; paged: k, v the
 * 4-D page caches (any page stride). lse may be NULL. */
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_run(const attnjit_batch_prefill_t* w, const DLTensor* q,
                                                       const DLTensor* k, const DLTensor* v, DLTensor* o,
                                                       DLTensor* lse, void* stream);
/* attnjit_batch_prefill_run with fp8 calibration scales (FlashInfer's
 * paged run(k_scale, v_scale)): k_scale multiplies the logits' scale,
 * v_scale the output; 0 means not provided (1), else > 0 and finite. */
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_run_v2(const attnjit_batch_prefill_t* w, const DLTensor* q,
                                                          const DLTensor* k, const DLTensor* v, DLTensor* o,
                                                          DLTensor* lse, float k_scale, float v_scale, void* stream);
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_workspace_bytes(const attnjit_batch_prefill_t* w, size_t* out);
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_destroy(attnjit_batch_prefill_t* w);

#ifdef __cplusplus
}
#endif
#endif /* ATTNJIT_H_ */

/* Batch prefill: FlashInfer's BatchPrefillWithRaggedKVCacheWrapper and
 * BatchPrefillWithPagedKVCacheWrapper as an attnjit_plan_t of operator
 * "batch_prefill": created once, planned per batch layout, run per layer
 * (launches only, graph-capturable).
 *
 * Memory, as FlashInfer's: float_workspace_buffer is scratch for a KV split's
 * partial states while a run executes, so any number of wrappers (decode,
 * prefill, cascade levels) may share one, planned in any order and run in any
 * order on one stream. What plan() uploads (the work list, index arrays, the
 * packed mask) lives in memory the wrapper owns: the library's own, or a
 * caller's buffer given to attnjit_plan_set_int_workspace (FlashInfer's
 * int_workspace_buffer). */
#ifndef ATTNJIT_BATCH_PREFILL_H_
#define ATTNJIT_BATCH_PREFILL_H_

#include "attnjit/attnjit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attnjit_batch_prefill_wrapper_options {
  uint32_t struct_size;   /* set by init */
  int32_t paged;          /* 1: the paged wrapper; 0 (default): ragged */
  int32_t kv_layout;      /* attnjit_kv_layout_t; default NHD */
  int32_t backend;        /* attnjit_prefill_backend_t; default AUTO */
  int32_t use_cuda_graph; /* 0 or 1; default 0 */
  int32_t device;         /* CUDA ordinal of the workspace and the tensors; default 0 */
} attnjit_batch_prefill_wrapper_options_t;

ATTNJIT_API void attnjit_batch_prefill_wrapper_options_init(attnjit_batch_prefill_wrapper_options_t* options);

/* float_workspace_buffer: device memory, 256-byte aligned, on
 * options->device, the caller's, outliving the handle. With use_cuda_graph,
 * plan() copies the index arrays into the caller's fixed buffers instead, so
 * a run() captured in a CUDA graph replays the latest plan: int32 (custom
 * mask: uint8) 1-D contiguous device arrays: qo_indptr_buf and kv_indptr_buf
 * (FlashInfer's paged_kv_indptr_buf) [max_batch_size + 1]; paged only, and
 * then required: paged_kv_indices_buf [max_num_pages],
 * paged_kv_last_page_len_buf [max_batch_size]; custom_mask_buf and
 * mask_indptr_buf [max_batch_size + 1] together or neither. Without
 * use_cuda_graph all six are NULL. */
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_wrapper_create(
    attnjit_runtime_t* rt, void* float_workspace_buffer, size_t float_workspace_bytes,
    const attnjit_batch_prefill_wrapper_options_t* options, const DLTensor* qo_indptr_buf,
    const DLTensor* kv_indptr_buf, const DLTensor* paged_kv_indices_buf, const DLTensor* paged_kv_last_page_len_buf,
    const DLTensor* custom_mask_buf, const DLTensor* mask_indptr_buf, attnjit_plan_t** out);

/* Host arrays (kDLCPU or kDLCUDAHost, 1-D, contiguous, int32): qo_indptr and
 * kv_indptr [batch + 1] (ragged: K/V rows; paged: pages); paged only:
 * paged_kv_indices [kv_indptr[batch]] and paged_kv_last_page_len [batch],
 * page_size (ragged: NULL, NULL, 0). custom_mask: NULL, or a host uint8/bool
 * array of FlashInfer's flattened mask (every request's [qo_len, kv_len]
 * block row-major, 0 / 1). options->kv_layout and ->backend are ignored (the
 * wrapper's). q_data_type: float16/bfloat16, or float8_e4m3fn (ragged only,
 * with e4m3 kv_data_type and options->o_dtype float16 or bfloat16: the
 * warp-specialized Hopper kernel, head_dim 128, sm_90a); kv_data_type bits
 * 0: q's, else also fp8 (attnjit_fp8.h codes). The output's dtype is
 * options->o_dtype (bits 0: q's). Not while `stream` captures a graph. */
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_wrapper_plan(
    attnjit_plan_t* wrapper, const DLTensor* qo_indptr, const DLTensor* kv_indptr, const DLTensor* paged_kv_indices,
    const DLTensor* paged_kv_last_page_len, int page_size, int num_qo_heads, int num_kv_heads, int head_dim,
    const attnjit_prefill_options_t* options, DLDataType q_data_type, DLDataType kv_data_type,
    const DLTensor* custom_mask, void* stream);

/* FlashInfer's workspace_size(): what attnjit_batch_prefill_wrapper_plan
 * with these arguments would need, without planning. *float_workspace_bytes:
 * the scratch it needs of float_workspace_buffer (attnjit_plan_workspace_bytes
 * after that plan; the plan refuses a smaller float workspace with
 * ATTNJIT_ERROR_WORKSPACE_TOO_SMALL naming float_workspace_buffer).
 * *int_workspace_bytes: the plan memory it fills
 * (attnjit_plan_int_workspace_bytes after it; what a buffer given to
 * attnjit_plan_set_int_workspace must hold). The plan call's checks and
 * errors, in CUDA-graph mode against the runs so far; nothing is allocated,
 * uploaded or compiled and the wrapper's current plan is untouched. Reads the
 * device's figures (SM count, arch), so the device must be present. */
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_wrapper_workspace_bytes(
    const attnjit_plan_t* wrapper, const DLTensor* qo_indptr, const DLTensor* kv_indptr,
    const DLTensor* paged_kv_indices, const DLTensor* paged_kv_last_page_len, int page_size, int num_qo_heads,
    int num_kv_heads, int head_dim, const attnjit_prefill_options_t* options, DLDataType q_data_type,
    DLDataType kv_data_type, const DLTensor* custom_mask, size_t* float_workspace_bytes,
    size_t* int_workspace_bytes);

/* q [nnz_qo, H_qo, D]; ragged: k, v [nnz_kv, H_kv, D] (NHD) or
 * [H_kv, nnz_kv, D]; paged: k, v the 4-D page caches (any page stride; a 5-D
 * [pages, 2, ...] cache is its two halves). o [nnz_qo, H_qo, D] in the
 * plan's output dtype (options->o_dtype, bits 0: q's), contiguous rows; lse
 * [nnz_qo, H_qo] float32 (base 2) or NULL. k_scale, v_scale: fp8
 * calibration (0: not provided, else > 0 and finite); with fp8 q pass
 * q_scale * k_scale as k_scale (both multiply the logits' scale). */
ATTNJIT_API attnjit_status_t attnjit_batch_prefill_wrapper_run(const attnjit_plan_t* wrapper, const DLTensor* q,
                                                               const DLTensor* k, const DLTensor* v, DLTensor* o,
                                                               DLTensor* lse, float k_scale, float v_scale,
                                                               void* stream);

#ifdef __cplusplus
}
#endif
#endif /* ATTNJIT_BATCH_PREFILL_H_ */

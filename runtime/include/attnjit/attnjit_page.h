/* FlashInfer's paged-cache helpers through attnjit's C API
 * (flashinfer.page.append_paged_kv_cache and get_batch_indices_positions).
 *
 * Each call is one kernel launch on `stream`: no workspace, no allocation,
 * no host read of device data and no sync, so both may be captured in a
 * CUDA graph (once the kernel is loaded: the first call for an element
 * width compiles or loads it). Index arrays are int32 DLTensors on the
 * device, 1-D and contiguous, as FlashInfer requires; other integer types
 * are refused by name.
 *
 * The kernels check every index before it addresses memory. An appended row
 * whose request, position or page id lies outside the tables is skipped,
 * never written elsewhere: batch_indices outside [0, batch_size), a position
 * < 0 or at or past the request's length ((pages - 1) * page_size +
 * kv_last_page_len), a kv_indices entry outside the array, a page id outside
 * [0, pages of the cache). The first skipped row is reported as
 * ATTNJIT_ERROR_INVALID_ARGUMENT naming the array, the index and the value by
 * the next append call on the device, or attnjit_runtime_check (attnjit.h).
 *
 * Errors follow attnjit.h: a status code, and attnjit_last_error() naming
 * the argument, its value and what is allowed. */
#ifndef ATTNJIT_PAGE_H_
#define ATTNJIT_PAGE_H_

#include "attnjit/attnjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes append_key and append_value [nnz, num_kv_heads, head_dim] into the
 * paged cache: row i goes to request b = batch_indices[i] at position
 * p = positions[i], that is page kv_indices[kv_indptr[b] + p / page_size],
 * slot p % page_size. The tables already count the appended rows
 * (FlashInfer's contract).
 *
 * k_cache, v_cache: [pages, page_size, num_kv_heads, head_dim] for
 * kv_layout NHD, [pages, num_kv_heads, page_size, head_dim] for HND, any
 * strides; or v_cache NULL and k_cache the 5-D single-tensor cache
 * [pages, 2, ...] (K at [:, 0], V at [:, 1]). The four tensors share one
 * dtype (float16, bfloat16, float8_e4m3fn, float8_e5m2: the rows are copied,
 * not converted) and one CUDA device; 16-byte accesses where every address
 * and stride allows.
 *
 * batch_indices, positions [nnz]; kv_indices [any length]; kv_indptr
 * [batch_size + 1]; kv_last_page_len [batch_size]: int32 on that device. */
ATTNJIT_API attnjit_status_t attnjit_append_paged_kv_cache(attnjit_runtime_t* rt, const DLTensor* append_key,
                                                           const DLTensor* append_value,
                                                           const DLTensor* batch_indices, const DLTensor* positions,
                                                           DLTensor* k_cache, DLTensor* v_cache,
                                                           const DLTensor* kv_indices, const DLTensor* kv_indptr,
                                                           const DLTensor* kv_last_page_len, int32_t kv_layout,
                                                           void* stream);

/* append_indptr [batch_size + 1] and seq_lens [batch_size] -> batch_indices
 * and positions [nnz], int32 on one CUDA device. Entry j with
 * append_indptr[b] <= j < append_indptr[b + 1] gets b and
 * j + seq_lens[b] - append_indptr[b + 1]; an entry that no request covers
 * gets batch_indices -1 and keeps its position (FlashInfer fills -1 and 0
 * first: pass a zeroed positions array for its result). Nothing at or past
 * nnz is written, whatever append_indptr holds. */
ATTNJIT_API attnjit_status_t attnjit_get_batch_indices_positions(attnjit_runtime_t* rt, const DLTensor* append_indptr,
                                                                 const DLTensor* seq_lens, int64_t nnz,
                                                                 DLTensor* batch_indices, DLTensor* positions,
                                                                 void* stream);

#ifdef __cplusplus
}
#endif
#endif /* ATTNJIT_PAGE_H_ */

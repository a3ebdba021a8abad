// Parameters of the paged-cache helpers (paged_kv_append.cuh,
// batch_positions.cuh), included by host and device code.
#pragma once
#include "fast_divmod.h"
#include "platform.cuh"
#include "table_check.h"

namespace attnjit {
namespace kernels {

// One side (K or V) of an append: where its rows come from and go. Strides
// in elements; the host resolves the cache layout (NHD or HND) into the
// slot and head strides, so the kernel has no layout of its own.
struct PageAppendSide {
  const void* src;  // append_key / append_value [nnz, heads, head_dim]
  void* cache;      // k_cache / v_cache: element (page, slot, head, d)
  int64_t src_token, src_head, src_chunk;
  int64_t cache_page, cache_slot, cache_head, cache_chunk;
};

// append_paged_kv_cache: row r = token * heads + head of the append goes to
// the page kv_indices[kv_indptr[b] + position / page_size], slot position %
// page_size, of request b = batch_indices[token]. A row whose request,
// position or page id lies outside the tables is not written, and the first
// such is recorded in `check` (see append_slot in paged_kv_append.cuh).
struct PageAppendParams {
  PageAppendSide k, v;
  const int32_t* batch_indices;     // [nnz]
  const int32_t* positions;         // [nnz]
  const int32_t* kv_indices;        // [num_indices]
  const int32_t* kv_indptr;         // [batch_size + 1]
  const int32_t* kv_last_page_len;  // [batch_size]
  int64_t num_indices;
  int64_t num_pages;                // pages of the cache: page ids in [0, num_pages)
  int32_t batch_size;
  uint32_t rows;                    // nnz * heads, < 2^31
  FastDivmod heads;                 // row -> (token, head)
  FastDivmod page_size;             // position -> (page of the request, slot)
  int32_t chunks;                   // vectors of vec_bytes per row
  int32_t vec_bytes;                // 16, 8, 4, 2 or 1, at least the element size
  int32_t lanes_log2;               // threads per row = 1 << lanes_log2
  TableCheckRecord* check;          // where a skipped row's reason is recorded (null: nowhere)
};

// get_batch_indices_positions: entry j < nnz of the ragged append belongs to
// the request b with append_indptr[b] <= j < append_indptr[b + 1]; then
// batch_indices[j] = b and positions[j] = j + seq_lens[b] - append_indptr[b + 1].
// An entry no request covers gets batch_indices[j] = -1 and keeps its position.
struct BatchPositionsParams {
  const int32_t* append_indptr;  // [batch_size + 1]
  const int32_t* seq_lens;       // [batch_size]
  int32_t* batch_indices;        // [nnz]
  int32_t* positions;            // [nnz]
  int32_t batch_size;
  int32_t nnz;
};

}  // namespace kernels
}  // namespace attnjit

// Where a kernel finds K and V: one params struct for every way a KV cache is
// laid out, read on the device through the matching type in kv_source.cuh.
// Included by host and device code.
//
// Element (row j, head h, dim d) of K, with j's page p and slot r = j % page_size:
//   contiguous:  k + j * k_stride_row + h * k_stride_head + d
//   paged:       k + page(p) * k_stride_page + r * k_stride_row + h * k_stride_head + d
// (strides in elements; NHD and HND layouts differ only in the strides).
#pragma once
#include "fast_divmod.h"
#include "platform.cuh"
#include "table_check.h"

namespace attnjit {
namespace kernels {

enum KVSourceKind : int32_t {
  kKVContiguous = 0,  // one sequence, [kv_len, heads, D] or [heads, kv_len, D]
  kKVPaged = 1,       // FlashInfer: pages indices[indptr[b] .. indptr[b+1]), the last one last_page_len[b] rows full
  kKVBlockTable = 2,  // vLLM-style block tables: pages k_table[b * table_stride + p], length seq_lens[b]
  kKVRagged = 3,      // requests back to back in one contiguous tensor: rows indptr[b] .. indptr[b+1]
};

struct KVSourceParams {
  const void* k;
  const void* v;
  int64_t k_stride_page, k_stride_row, k_stride_head;  // in elements
  int64_t v_stride_page, v_stride_row, v_stride_head;
  FastDivmod page_size;  // paged kinds; built on the host, so the kernel keeps no divisor registers
  int32_t kv_len;      // contiguous: the sequence length; ragged: the tensor's rows (what indptr may reach)
  // kKVPaged (and kKVRagged: row offsets)
  const int32_t* indptr;         // [batch + 1], into indices (ragged: into rows)
  const int32_t* indices;        // page ids
  const int32_t* last_page_len;  // [batch], in [1, page_size]
  // kKVBlockTable
  const int32_t* k_table;        // [batch, table_stride] page ids of K
  const int32_t* v_table;        // the same for V (may equal k_table)
  int64_t table_stride;
  const int32_t* seq_lens;       // [batch]
  // Bounds for the L2 hints a decode CTA sends before pdl_wait(), when the
  // page table may still be in flight (kv_source.cuh): the entries the page
  // table holds (indices' length; a block table row's pages) and the
  // cache's pages. 0: unknown, and no row of a paged source is warmed.
  int64_t table_entries;
  int32_t num_pages;
  // The paged and ragged sources check what they read from the tables
  // (kv_source.cuh): page ids against num_pages, FlashInfer's indptr against
  // table_entries (0: unbounded), a ragged indptr against kv_len,
  // last_page_len against page_size, a block table's seq_lens against
  // max_len (the longest the plan allows). A violation reads nothing outside
  // the cache and is recorded in `check` (null: nowhere) under the entry
  // point's names (TableNames); prefill records its qo_indptr's there too.
  TableCheckRecord* check;
  int32_t check_names;
  int32_t max_len;
};

}  // namespace kernels
}  // namespace attnjit

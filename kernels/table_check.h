// The first bad entry a kernel found in a device-resident table (a page id
// outside the cache, a length past what the plan allows, ...), written where
// the host reads it without a copy or a sync, and included by host and
// device code so the layout cannot drift.
//
// The record lives in pinned host memory (under unified addressing its
// address is valid on the device), owned by a plan or, for the one-call entry
// points, by the engine per device (runtime/src/table_check.hpp). A kernel
// that finds a violation substitutes a safe value (a page of the cache, the
// clamped length, no pages, no rows or keys), keeps computing, and records
// it: the first thread to claim the record (state 0 -> 1) writes the fields,
// fences to the system, then marks it written (2). Later violations find it claimed and are dropped, so only
// the first is kept. The host reads it at the next call and clears it.
#pragma once
#include "platform.cuh"

namespace attnjit {
namespace kernels {

// What was wrong: entry [index0] (or [index0][index1]) of an array held
// `value`, where [low, high] is allowed.
enum TableFault : int32_t {
  kFaultNone = 0,
  kFaultPageId = 1,       // a page id outside the cache: allowed [0, pages - 1]
  kFaultLength = 2,       // a sequence length outside [0, the plan's maximum]
  kFaultIndptr = 3,       // a page-table indptr entry outside [the entry before, the table's entries]
  kFaultLastPageLen = 4,  // a last page's length outside [1, page_size]
  kFaultBatchIndex = 5,   // append: a row's request outside [0, batch_size - 1]
  kFaultPosition = 6,     // append: a row's position outside its request's rows (index1: the request)
  // A per-request query-row indptr (speculative decode's cum_seq_lens_q, a
  // batch prefill's qo_indptr): entry index0 outside [low, high], the rows
  // after the request's first entry (at most max_q_len of them in decode,
  // within q's rows; index1: the request).
  kFaultQueryIndptr = 7,
  // cuDNN's ragged batch offsets: row index0's offset outside [low, high]
  // (its heads and dims inside the tensor) or off the step index1 (16-byte
  // rows); side 0 q's (batch_offsets_q), 1 the output's (batch_offsets_o).
  kFaultRowOffset = 8,
};

// Whose names the message uses: the kernels cannot tell the entry points
// apart, so the launch says which it is.
enum TableNames : int32_t {
  kNamesDecodeWrapper = 0,  // indptr, indices, last_page_len (BatchDecodeWithPagedKVCacheWrapper)
  kNamesBlockTable = 1,     // k_block_table / v_block_table, seq_lens, max_seq_len (BatchDecodePlan)
  kNamesTrtllm = 2,         // block_tables, seq_lens, max_seq_len
  kNamesCudnn = 3,          // block_tables, actual_seq_lens_kv, max_sequence_kv
  kNamesPrefill = 4,        // qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len (paged wrapper)
  kNamesAppend = 5,         // kv_indptr, kv_indices, kv_last_page_len, batch_indices, positions
  kNamesDecodePlan = 6,     // indptr, indices, last_page_len of a BatchDecodePlan's PagedKVView
  kNamesRaggedPrefill = 7,  // qo_indptr, kv_indptr (rows of k) (BatchPrefillWithRaggedKVCacheWrapper)
};

struct TableCheckRecord {
  int32_t state;  // 0 empty, 1 a kernel is writing it, 2 written
  int32_t fault;  // TableFault
  int32_t names;  // TableNames
  int32_t side;   // of a pair of tables: -1 one table (or K and V share it), 0 K's, 1 V's
  int64_t index0, index1;  // index1 < 0: a one-dimensional array
  int64_t value;
  int64_t low, high;
};

}  // namespace kernels

#if defined(__CUDACC__)
// Records a fault unless one is recorded already. Cold: called only where a
// check failed, never in a loop.
ATTNJIT_DEVICE void report_table_fault(kernels::TableCheckRecord* r, int32_t fault, int32_t names, int32_t side,
                                       int64_t index0, int64_t index1, int64_t value, int64_t low, int64_t high) {
  if (!r || atomicCAS(&r->state, 0, 1) != 0) return;
  r->fault = fault;
  r->names = names;
  r->side = side;
  r->index0 = index0;
  r->index1 = index1;
  r->value = value;
  r->low = low;
  r->high = high;
  __threadfence_system();  // the fields reach the host before the state says they are there
  *reinterpret_cast<volatile int32_t*>(&r->state) = 2;
}
#endif

}  // namespace attnjit

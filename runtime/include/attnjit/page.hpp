// FlashInfer's paged-cache helpers (flashinfer.page): append_paged_kv_cache
// writes new K/V rows into a paged cache; get_batch_indices_positions turns
// a ragged append's indptr and the requests' lengths into each row's
// request and position. Each is one kernel launch on the caller's stream,
// with no workspace, no allocation and no sync, so both are CUDA-graph
// capturable. The first call for an element width compiles or loads the
// kernel. (get_seq_lens is plain arithmetic: the Python module's page.py.)
//
// Index arrays are int32 device arrays the host never reads. The kernels
// check every index before it addresses memory: an append row whose request,
// position or page id lies outside the tables (request outside [0,
// batch_size), position < 0 or at or past the request's length, kv_indices
// entry outside its array, page id outside the cache) is skipped, not
// written anywhere, and the first is raised as Error(InvalidArgument) naming
// the array, the index and the value at the next append (or TensorRT-LLM /
// cuDNN batch decode) call on the device, or by Runtime::check(device).
#pragma once
#include <cstdint>

#include "attnjit/runtime.hpp"
#include "attnjit/tensor.hpp"
#include "attnjit/types.hpp"

namespace attnjit {

// The page table of an append, FlashInfer's: request b owns the pages
// kv_indices[kv_indptr[b] .. kv_indptr[b + 1]), the last holding
// kv_last_page_len[b] rows, so its length is (pages - 1) * page_size +
// kv_last_page_len[b]; the tables already count the appended rows. Row i of
// the append belongs to request batch_indices[i] at position positions[i]
// (get_batch_indices_positions makes both). Device addresses of int32
// arrays, each element-aligned; may be null only when their length is 0.
struct PagedKVAppendTable {
  const int32_t* batch_indices = nullptr;     // [nnz], nnz = append_key.shape[0]
  const int32_t* positions = nullptr;         // [nnz]
  const int32_t* kv_indices = nullptr;        // [num_indices]
  int64_t num_indices = 0;
  const int32_t* kv_indptr = nullptr;         // [batch_size + 1]
  const int32_t* kv_last_page_len = nullptr;  // [batch_size]
  int batch_size = 0;
};

// append_key, append_value [nnz, num_kv_heads, head_dim]; k_cache, v_cache
// [pages, page_size, num_kv_heads, head_dim] (NHD) or [pages, num_kv_heads,
// page_size, head_dim] (HND), e.g. the halves of a 5-D [pages, 2, ...] cache
// (kv_cache_halves in batch_decode.hpp). One dtype for all four (float16,
// bfloat16, float8_e4m3fn or float8_e5m2: the rows are copied, not
// converted), one device; any strides (16-byte accesses where every address
// and stride allows, narrower ones otherwise).
ATTNJIT_API void append_paged_kv_cache(const Runtime& rt, const TensorView& append_key, const TensorView& append_value,
                                       const PagedKVAppendTable& table, const TensorView& k_cache,
                                       const TensorView& v_cache, KVLayout kv_layout, Stream stream);

// append_indptr [batch_size + 1] and seq_lens [batch_size] (int32, on
// `device`) -> batch_indices and positions [nnz] (int32, written on
// `device`): entry j with append_indptr[b] <= j < append_indptr[b + 1] gets
// b and j + seq_lens[b] - append_indptr[b + 1]; an entry no request covers
// gets batch_indices -1 and its position is left as it is (FlashInfer's
// semantics). Entries at or past nnz are never written.
ATTNJIT_API void get_batch_indices_positions(const Runtime& rt, const int32_t* append_indptr, const int32_t* seq_lens,
                                             int batch_size, int64_t nnz, int32_t* batch_indices,
                                             int32_t* positions, int device, Stream stream);

}  // namespace attnjit

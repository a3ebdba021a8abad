// Parameters of the merge kernel (merge.cuh), included by host and device code.
#pragma once
#include "platform.cuh"

namespace attnjit {
namespace kernels {

// Merges per-split partial states (normalized o and base-2 lse) of `num_rows`
// rows (a row = one query token of one head) into the final output.
//
// Rows come in requests of rows_per_request (the query heads; single decode:
// one request). Without indptr every row has num_splits partials: split s of
// grid row g at partial row s * num_rows + g. With indptr (batch decode's
// work list) request b owns the partial slots [indptr[b], indptr[b+1]), slot
// s of its row r at partial row s * rows_per_request + r; a request with no
// slots was written whole by the decode kernel and is skipped, and so are
// padding requests of a fixed grid.
struct MergeParams {
  const float* partial_o;    // [partial rows, head_dim]
  const float* partial_lse;  // [partial rows]
  void* o;                   // request b, row r at o + b * o_stride_request + r * o_stride_row
  float* lse;                // [num_rows] or null (row b * rows_per_request + r)
  const int32_t* indptr;     // [requests + 1] or null
  const float* sinks;        // [rows_per_request] (row r of a request: its qo head) or null: variant.cuh
  int64_t o_stride_row;
  int64_t o_stride_request;
  int32_t num_rows;          // rows in the grid: requests * rows_per_request
  int32_t num_splits;        // without indptr
  int32_t rows_per_request;
};

}  // namespace kernels
}  // namespace attnjit

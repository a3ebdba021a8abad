// Parameters of the merge kernel (merge.cuh), included by host and device code.
#pragma once
#include "platform.cuh"

namespace attnjit {
namespace kernels {

// Merges per-split partial states (normalized o and base-2 lse) of `num_rows`
// rows (a row = one query token of one head) into the final output.
//
// Rows come in requests of rows_per_request (0 means one request of
// num_rows; the query heads for batch decode). Three input layouts:
//  * packed (heads == 0, no indptr): every row has num_splits states; state s
//    of grid row g is partial row s * num_rows + g (decode, prefill splits);
//  * per request (indptr, batch decode's work list): request b owns the
//    partial slots [indptr[b], indptr[b+1]); slot s of its row r is partial
//    row s * rows_per_request + r. A request with no slots was written whole
//    by the decode kernel and is skipped, and so are padding requests of a
//    fixed grid;
//  * strided (heads > 0: merge_state, merge_states): row r is sequence
//    position r / heads, head r % heads; its state s starts at element
//      in_seq_stride * (r / heads) + in_head_stride * (r % heads) + in_state_stride * s
//    of partial_o, and its lse at the same form with the lse_* strides.
//
// Batch decode with several query tokens per request (heads_per_token > 0):
// row r of a request is its token r / heads_per_token, head r %
// heads_per_token, written to token row t of o (o_stride_token) and lse
// ([tokens, heads_per_token]); the request's token 0 is row q_indptr[b] and a
// token at or past q_indptr[b+1] does not exist (skipped), or, without
// q_indptr, row b * (rows_per_request / heads_per_token).
struct MergeParams {
  const void* partial_o;     // in the input type (decode, prefill: f32)
  const float* partial_lse;
  void* o;                   // request b, row r at o + b * o_stride_request + r * o_stride_row
  float* lse;                // [num_rows] or null (row b * rows_per_request + r; heads_per_token: token * heads + head)
  const int32_t* indptr;     // [requests + 1] or null
  const float* sinks;        // per qo head (row r of a request, or its head with heads_per_token) or null: variant.cuh
  int64_t o_stride_row;
  int64_t o_stride_request;
  int32_t num_rows;          // rows in the grid
  int32_t num_splits;        // without indptr
  int32_t rows_per_request;  // 0: num_rows
  int32_t heads;             // strided layout when > 0
  int64_t in_seq_stride, in_head_stride, in_state_stride;
  int64_t lse_seq_stride, lse_head_stride, lse_state_stride;
  const uint8_t* row_mask;   // null: every row; else [sequence positions]: rows whose byte is 0 are not written
  int32_t heads_per_token;   // 0: a request's rows are not tokens x heads; else see above
  int64_t o_stride_token;    // heads_per_token > 0: o's token stride (o_stride_row is then the head stride)
  const int32_t* q_indptr;   // heads_per_token > 0: [requests + 1] or null
  int64_t q_rows;            // with q_indptr: o's token rows; a request whose rows fall outside is not written
  const int32_t* o_token_offsets;  // heads_per_token > 0: token row t of o at this element offset, or null
                                   // (t * o_stride_token): cuDNN's ragged batch_offsets_o
  // With o_token_offsets: the largest offset and the step a row's keeps; the
  // decode kernel voids (and records) a request whose offset is outside, and
  // the merge writes nothing for it.
  int64_t o_token_offset_max;
  int32_t o_token_offset_step;
  // cuDNN's batch_offsets_q, its largest offset and step: the decode kernel
  // voids a request with a bad q offset too, so its split states were never
  // written and the merge must not write its rows from them.
  const int32_t* q_token_offsets;
  int64_t q_token_offset_max;
  int32_t q_token_offset_step;
};

}  // namespace kernels
}  // namespace attnjit

// Which part of which request a decode CTA computes. When the lengths are
// known on the host, batch decode's planner writes one DecodeWorkItem per
// item (blockIdx.z): a chunk of one request's KV rows, balanced across
// the batch, and where its result goes. Otherwise (single decode; lengths
// only on the device) the partition is uniform and follows from the item,
// so the launch reads no list: every request gets num_splits chunks of
// chunk_size rows, and a chunk past a request's end is empty, not an error.
// Rows are counted from the first row inside the sliding window of the
// request's first query token, which the device derives from the lengths it
// reads (with several tokens, later ones check their own window per row:
// decode_queries.cuh).
#pragma once
#include "decode_params.h"
#include "platform.cuh"

namespace attnjit {

struct DecodeWork {
  int request;  // < 0: a padding item of a fixed (CUDA-graph) grid; the CTA exits
  int begin, end;  // absolute KV rows [begin, end), clamped to the request's length
  int slot;        // < 0: write o and lse; else the partial-state slot (merge.cuh)
};

// The first row the first of q_len query tokens (at position len - q_len) sees.
ATTNJIT_DEVICE int window_first_row(int window_left, int len, int q_len) {
  return window_left >= 0 ? max(0, len - q_len - window_left) : 0;
}

// The grid: x the head blocks (and token tiles) of one KV head, y the KV
// heads, z the work items. CTAs start in x, y, z order, so every head of
// one item goes before the next item: the work list's order (longest chunk
// first) holds across the whole grid. With the heads slowest instead, the
// last head's long chunks of a skewed batch started in the last wave.
ATTNJIT_DEVICE int decode_kv_head() { return blockIdx.y; }
ATTNJIT_DEVICE int decode_item_index() { return blockIdx.z; }
// The CTAs that compute the same query rows of one request (its chunks)
// form a row group; its index among every request's, for the in-kernel
// merge's counters (decode_params.h).
ATTNJIT_DEVICE int64_t decode_row_group(int request) {
  return (int64_t(request) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
}
// How many chunks (partial slots) a split request has, and its k-th slot.
ATTNJIT_DEVICE int split_count(const kernels::DecodeParams& p, int request) {
  return p.merge_indptr ? p.merge_indptr[request + 1] - p.merge_indptr[request] : p.num_splits;
}
ATTNJIT_DEVICE int split_slot(const kernels::DecodeParams& p, int request, int k) {
  return p.merge_indptr ? p.merge_indptr[request] + k : k * p.num_requests + request;
}

// The raw item of this CTA; resolve() turns it into rows once the length is known.
ATTNJIT_DEVICE kernels::DecodeWorkItem decode_work_item(const kernels::DecodeParams& p) {
  const int item = decode_item_index();
  if (p.work) {
    const int4 w = __ldg(reinterpret_cast<const int4*>(p.work) + item);
    return {w.x, w.y, w.z, w.w};
  }
  // Requests fastest: a split's CTAs of all requests run side by side. Slot
  // s * num_requests + b puts split s of every row num_requests * heads apart,
  // the fixed-stride layout merge.cuh reads without an indptr.
  const int b = item % p.num_requests, s = item / p.num_requests;
  return {b, s * p.chunk_size, (s + 1) * p.chunk_size, p.num_splits > 1 ? s * p.num_requests + b : -1};
}

ATTNJIT_DEVICE DecodeWork resolve_work(const kernels::DecodeWorkItem& w, int window_left, int len, int q_len = 1) {
  const int first = window_first_row(window_left, len, q_len);
  return {w.request, min(first + w.begin, len), min(first + w.end, len), w.slot};
}

}  // namespace attnjit

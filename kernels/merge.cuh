// Merges partial attention states computed over disjoint KV chunks:
//   lse = log2 sum_s 2^lse_s,   o = sum_s 2^(lse_s - lse) o_s
// One CTA per output row (a row = one query token of one head). The splits
// are spread over the CTA's threads, kGroups of them at a time, so the loads
// of many splits are in flight at once: a loop over splits in one thread
// waits out a memory latency per split (measured: 17 us for 32 splits).
// Single decode and prefill use it with a fixed split count, batch decode
// with a per-request count through an indptr, merge_state(s) with strided
// inputs (merge_params.h).
#pragma once
#include "merge_params.h"
#include "math.cuh"
#include "numeric.cuh"
#include "softmax_state.cuh"
#include "state_fold.cuh"
#include "variant.cuh"

namespace attnjit {

template <int HeadDim, class OT, int Warps, class InT = f32>
struct MergeTraits {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kSlices = HeadDim / 8;         // 8-wide slices of a row
  static constexpr int kGroups = kThreads / kSlices;  // splits handled side by side
  using o_t = OT;
  using in_t = InT;
};

// Where row `row`'s state 0 starts (o in elements of the input, lse in
// floats), the distance between consecutive states, how many states it has,
// and where its output goes (merge_params.h's layouts).
struct MergeRowAddress {
  int64_t o, o_step, lse, lse_step;
  int num_splits;   // 0: nothing to write (a padding request or token, or a row written by the decode kernel)
  int64_t out;      // element offset into o
  int64_t lse_out;  // index into lse
  int head;         // the qo head (sinks are per head): row r of a request, or its head with heads_per_token
};

// A ragged row offset (cuDNN's batch offsets) inside its tensor and on its step; no offsets: fine.
ATTNJIT_DEVICE bool offset_ok(const int32_t* offsets, int64_t token, int64_t most, int32_t step) {
  if (!offsets) return true;
  const int32_t at = offsets[token];
  return at >= 0 && at <= most && at % step == 0;
}

// The output half: row r of `request`. Batch decode's rows are tokens x heads
// when heads_per_token > 0 (merge_params.h); a token past the request's own
// count exists only as padding of the partial states.
ATTNJIT_DEVICE bool merge_row_output(const kernels::MergeParams& p, int row, int request, int r, int rows_per_request,
                                     MergeRowAddress& at) {
  if (p.heads_per_token <= 0) {
    at.out = request * p.o_stride_request + r * p.o_stride_row;
    at.lse_out = row;
    at.head = r;
    return true;
  }
  const int t = r / p.heads_per_token, h = r - t * p.heads_per_token;
  const int tokens_per_request = rows_per_request / p.heads_per_token;
  int64_t first, next;
  if (p.q_indptr) {
    // The decode kernel voids (and records) a request whose rows fall outside o: nothing to write.
    first = p.q_indptr[request];
    next = p.q_indptr[request + 1];
    if (first < 0 || next < first || next - first > tokens_per_request || next > p.q_rows) return false;
  } else {
    first = int64_t(request) * tokens_per_request;
    next = first + tokens_per_request;
  }
  const int64_t token = first + t;
  if (token >= next) return false;
  // Likewise a request with any bad q or o offset (decode_queries.cuh's row_offsets_ok): every token of it.
  for (int64_t u = first; u < next; ++u)
    if (!offset_ok(p.q_token_offsets, u, p.q_token_offset_max, p.q_token_offset_step) ||
        !offset_ok(p.o_token_offsets, u, p.o_token_offset_max, p.o_token_offset_step))
      return false;
  const int64_t row_at = p.o_token_offsets ? int64_t(p.o_token_offsets[token]) : token * p.o_stride_token;
  at.out = row_at + h * p.o_stride_row;
  at.lse_out = token * p.heads_per_token + h;
  at.head = h;
  return true;
}

ATTNJIT_DEVICE MergeRowAddress merge_row_address(const kernels::MergeParams& p, int row, int head_dim) {
  const int rows_per_request = p.rows_per_request > 0 ? p.rows_per_request : p.num_rows;
  const int request = row / rows_per_request, r = row - request * rows_per_request;
  MergeRowAddress at{};
  if (p.indptr) {
    const int first = p.indptr[request];
    const int64_t base = int64_t(first) * rows_per_request + r;
    at.o = base * head_dim;
    at.o_step = int64_t(rows_per_request) * head_dim;
    at.lse = base;
    at.lse_step = rows_per_request;
    at.num_splits = p.indptr[request + 1] - first;
  } else if (p.heads == 0) {
    at.o = int64_t(row) * head_dim;
    at.o_step = int64_t(p.num_rows) * head_dim;
    at.lse = row;
    at.lse_step = p.num_rows;
    at.num_splits = p.num_splits;
  } else {
    const int64_t seq = row / p.heads, head = row % p.heads;
    at.o = seq * p.in_seq_stride + head * p.in_head_stride;
    at.o_step = p.in_state_stride;
    at.lse = seq * p.lse_seq_stride + head * p.lse_head_stride;
    at.lse_step = p.lse_state_stride;
    at.num_splits = p.num_splits;
  }
  // After the inputs: a padding request of a fixed grid has no slots, and
  // its q_indptr entries may not exist.
  if (at.num_splits > 0 && !merge_row_output(p, row, request, r, rows_per_request, at)) at.num_splits = 0;
  return at;
}

template <class Tr>
ATTNJIT_DEVICE void merge_states(const kernels::MergeParams& p) {
  __shared__ __align__(16) float sums[Tr::kGroups][Tr::kHeadDim];
  __shared__ float group_m[Tr::kGroups], group_d[Tr::kGroups];
  // The next kernel may launch now and wait in its own pdl_wait() for this
  // grid to finish (which waits for the kernel before): its launch, and a
  // decode's warming of L2 (decode_prefetch.cuh), overlap the decode's last
  // CTAs and the merge instead of following them.
  pdl_launch_dependents();
  pdl_wait();  // the partial states come from the kernel before
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  if (p.row_mask && !p.row_mask[p.heads ? row / p.heads : row]) return;  // the whole CTA: a row left as it is
  const MergeRowAddress at = merge_row_address(p, row, Tr::kHeadDim);
  if (at.num_splits <= 0) return;  // written by the decode kernel, or padding (request or token): uniform across the CTA
  constexpr int kInBytes = storage_bytes<typename Tr::in_t>::value;

  // One pass: thread (group, slice) folds splits group, group + kGroups, ...
  // into an online softmax state (a split's normalized o at weight 1 and
  // max lse_s), its loads unrolled so they are in flight together; then the
  // groups' states meet in shared memory. (A first pass for the largest
  // lse, then the weighted sums, waited out two rounds of loads and two
  // barriers: this kernel is on the critical path of every split launch.)
  const int slice = tid % Tr::kSlices, group = tid / Tr::kSlices, d0 = slice * 8;
  SoftmaxState acc;
  acc.init();
  const StateRun run{p.partial_lse + at.lse, at.lse_step,
                     static_cast<const char*>(p.partial_o) + (at.o + d0) * kInBytes, at.o_step * kInBytes};
  fold_states<typename Tr::in_t, 4, false>(acc, run, group, Tr::kGroups, at.num_splits);
#pragma unroll
  for (int i = 0; i < 8; ++i) sums[group][d0 + i] = acc.o.x[i];
  if (slice == 0) {  // every slice of a group saw the same lse values
    group_m[group] = acc.m;
    group_d[group] = acc.d;
  }
  __syncthreads();

  if (group != 0) return;
  for (int gi = 1; gi < Tr::kGroups; ++gi) {
    frag8 o;
#pragma unroll
    for (int i = 0; i < 8; ++i) o.x[i] = sums[gi][d0 + i];
    acc.merge(group_m[gi], group_d[gi], o);
  }
  apply_sink(acc, p.sinks, at.head);
  store8<typename Tr::o_t>(static_cast<char*>(p.o) + (at.out + d0) * storage_bytes<typename Tr::o_t>::value,
                           acc.normalized());
  if (p.lse && slice == 0) p.lse[at.lse_out] = acc.lse();
}

}  // namespace attnjit

// Which query rows a decode CTA owns, and where each one's q, o, lse and
// partial state live. Decode has one query token per request, so a CTA's
// rows are kHeads query heads sharing a KV head. Speculative decoding
// (TensorRT-LLM's q_len_per_req, or per-request lengths via cum_seq_lens_q)
// has q_len tokens per request: the last q_len positions of its sequence,
// token t at kv_len - q_len + t, each seeing the keys up to its own position
// (the variant's causal mask). A CTA then owns kTokens consecutive tokens x
// kHeads heads, token-major (row r: token r / kHeads, head r % kHeads), and
// blockIdx.x enumerates head blocks fastest, then token tiles, so every CTA
// of a KV head reads the same K/V rows, back to back (L2).
//
//   q / o row        q_first + t     (q_first: q_indptr[request], or request * q_len),
//                    at row * stride or at the row's ragged offset (q_elem, o_elem)
//   lse              (q_first + t) * num_qo_heads + head
//   partial state    (slot * max_q_len + t) * num_qo_heads + head
#pragma once
#include "decode_params.h"
#include "platform.cuh"
#include "table_check.h"

namespace attnjit {

template <int Heads, int Tokens>
struct DecodeQueryRows {
  static constexpr int kHeads = Heads;
  static constexpr int kTokens = Tokens;
  static constexpr int kRows = Heads * Tokens;

  int head0;        // the CTA's first qo head
  int token0;       // the CTA's first token, counted within its request
  int q_len;        // the request's tokens
  int max_q_len;    // tokens per slot of the partial states
  int64_t q_first;  // the request's token 0 as a row of q, o and lse

  ATTNJIT_DEVICE DecodeQueryRows(const kernels::DecodeParams& p, int request, int kv_head) {
    const int head_blocks = p.group_size / Heads;
    const int tile = blockIdx.x / head_blocks;
    head0 = kv_head * p.group_size + (blockIdx.x - tile * head_blocks) * Heads;
    token0 = tile * Tokens;
    max_q_len = max(p.q_len, 1);  // a zero-filled params struct (single decode): one token
    if (p.q_indptr) {
      // Device data: a request whose rows fall outside q, or number more than
      // max_q_len, is voided (no rows) and recorded.
      const int32_t first = p.q_indptr[request], next = p.q_indptr[request + 1];
      q_first = first;
      q_len = next - first;
      if (first < 0 || first > p.q_rows) {
        report_table_fault(p.kv.check, kernels::kFaultQueryIndptr, p.kv.check_names, -1, request, request, first, 0,
                           p.q_rows);
        q_first = 0;
        q_len = 0;
      } else if (next < first || next - first > max_q_len || next > p.q_rows) {
        report_table_fault(p.kv.check, kernels::kFaultQueryIndptr, p.kv.check_names, -1, request + 1, request, next,
                           first, int64_t(first) + max_q_len < p.q_rows ? int64_t(first) + max_q_len : p.q_rows);
        q_first = 0;
        q_len = 0;
      }
    } else {
      q_first = int64_t(request) * max_q_len;
      q_len = max_q_len;
    }
    if ((p.q_row_offsets || p.o_row_offsets) && !row_offsets_ok(p)) {
      q_first = 0;
      q_len = 0;
    }
  }

  // cuDNN's batch offsets of the request's rows: each inside its tensor and
  // on its step; the first bad one is recorded. Once per CTA, where given.
  ATTNJIT_DEVICE bool row_offsets_ok(const kernels::DecodeParams& p) const {
    for (int t = 0; t < q_len; ++t) {
      const int64_t row = q_first + t;
      for (int side = 0; side < 2; ++side) {
        const int32_t* offsets = side ? p.o_row_offsets : p.q_row_offsets;
        if (!offsets) continue;
        const int64_t most = side ? p.o_row_offset_max : p.q_row_offset_max;
        const int32_t step = side ? p.o_row_offset_step : p.q_row_offset_step;
        const int32_t at = offsets[row];
        if (at < 0 || at > most || at % step != 0) {
          report_table_fault(p.kv.check, kernels::kFaultRowOffset, p.kv.check_names, side, row, step, at, 0, most);
          return false;
        }
      }
    }
    return true;
  }

  // A token tile past the request's last token: the CTA has nothing to do.
  ATTNJIT_DEVICE bool empty() const { return token0 >= q_len; }
  ATTNJIT_DEVICE int head(int r) const { return head0 + r % Heads; }
  ATTNJIT_DEVICE int token(int r) const { return token0 + r / Heads; }
  // Whether row r (< kRows) is a real token; the others are padding, computed but never stored.
  ATTNJIT_DEVICE bool stored(int r) const { return token(r) < q_len; }
  // The row's position in the KV sequence; negative when the request has more
  // tokens than keys (it then sees nothing).
  ATTNJIT_DEVICE int q_pos(int r, int kv_len) const { return kv_len - q_len + token(r); }
  // The token whose mask row a row reads: its own, or for padding the
  // request's last (decode_row_variant.cuh). Call once the CTA is not empty().
  ATTNJIT_DEVICE int mask_token(int r) const { return min(token(r), q_len - 1); }
  ATTNJIT_DEVICE int mask_q_pos(int r, int kv_len) const { return kv_len - q_len + mask_token(r); }
  ATTNJIT_DEVICE int64_t q_row(int r) const { return q_first + token(r); }
  // Where row r's token starts in q / o, in elements (decode_params.h: the ragged offsets).
  ATTNJIT_DEVICE int64_t q_elem(const kernels::DecodeParams& p, int r) const {
    const int64_t t = q_row(r);
    return p.q_row_offsets ? int64_t(p.q_row_offsets[t]) : t * p.q_stride_b;
  }
  ATTNJIT_DEVICE int64_t o_elem(const kernels::DecodeParams& p, int r) const {
    const int64_t t = q_row(r);
    return p.o_row_offsets ? int64_t(p.o_row_offsets[t]) : t * p.o_stride_b;
  }
  ATTNJIT_DEVICE int64_t partial_row(int slot, int r, int num_qo_heads) const {
    return (int64_t(slot) * max_q_len + token(r)) * num_qo_heads + head(r);
  }
};

}  // namespace attnjit

// append_paged_kv_cache (FlashInfer's semantics): copies the rows of
// append_key / append_value [nnz, heads, head_dim] into their pages.
//
// Threads are grouped per row (1 << lanes_log2 of them, a power of two up to
// the CTA), each moving vec_bytes of K and of V per step; CTAs stride over
// the rows. The copy is bytewise, so one kernel per element width serves
// every dtype of that width. vec_bytes is the widest access the host found
// every address and stride aligned to (16 for ordinary tensors); a switch on
// it picks the loop once per thread.
//
// The tables are device data the host never reads (no sync: graph
// capturable), so every index is checked before it addresses memory; a row
// that fails a check is skipped, never written elsewhere, and the first
// failure is recorded for the host to report (table_check.h).
#pragma once
#include "page_params.h"
#include "table_check.h"

namespace attnjit {

template <int Bytes> struct PageVec;
template <> struct PageVec<16> { using type = uint4; };
template <> struct PageVec<8> { using type = uint2; };
template <> struct PageVec<4> { using type = uint32_t; };
template <> struct PageVec<2> { using type = uint16_t; };
template <> struct PageVec<1> { using type = uint8_t; };

// The page and slot of `token`'s row, or false when the tables do not give
// one inside the cache: a request index outside [0, batch_size), a negative
// position, a position at or past the request's length ((pages - 1) *
// page_size + kv_last_page_len[b], and within its pages), a kv_indices
// entry outside the array (kv_indptr[b] negative, or kv_indptr[b + 1] past
// it or before kv_indptr[b]), or a page id outside [0, num_pages). Then
// `f` says which (one report site per kernel: the caller records it,
// table_check.h).
struct AppendFault {
  int32_t what;
  int64_t index0, index1, value, low, high;
};
ATTNJIT_DEVICE bool append_slot(const kernels::PageAppendParams& p, uint32_t token, int64_t& page, uint32_t& slot,
                                AppendFault& f) {
  using namespace kernels;
  auto fault = [&](int32_t what, int64_t index0, int64_t index1, int64_t value, int64_t low, int64_t high) {
    f = {what, index0, index1, value, low, high};
    return false;
  };
  const int32_t b = p.batch_indices[token];
  const int32_t pos = p.positions[token];
  if (b < 0 || b >= p.batch_size) return fault(kFaultBatchIndex, token, -1, b, 0, p.batch_size - 1);
  const int64_t first = p.kv_indptr[b], next = p.kv_indptr[b + 1];
  if (next < first) return fault(kFaultIndptr, b + 1, -1, next, first, p.num_indices);
  const int64_t pages = next - first;
  const int64_t length = min((pages - 1) * int64_t(p.page_size.d) + p.kv_last_page_len[b], pages * p.page_size.d);
  if (pos < 0 || pos >= length) return fault(kFaultPosition, token, b, pos, 0, length - 1);
  uint32_t page_of_request;
  p.page_size.divmod(uint32_t(pos), page_of_request, slot);
  const int64_t at = first + page_of_request;
  if (at < 0) return fault(kFaultIndptr, b, -1, first, 0, p.num_indices);
  if (at >= p.num_indices) return fault(kFaultIndptr, b + 1, -1, next, first, p.num_indices);
  const int32_t id = p.kv_indices[at];
  if (id < 0 || id >= p.num_pages) return fault(kFaultPageId, at, -1, id, 0, p.num_pages - 1);
  page = id;
  return true;
}

template <int ElemBytes, int VecBytes>
ATTNJIT_DEVICE void append_rows(const kernels::PageAppendParams& p) {
  using V = typename PageVec<VecBytes>::type;
  const uint32_t lanes = 1u << p.lanes_log2;
  const uint32_t lane = threadIdx.x & (lanes - 1);
  const uint32_t rows_per_cta = blockDim.x >> p.lanes_log2;
  const uint32_t step = gridDim.x * rows_per_cta;
  for (uint32_t row = blockIdx.x * rows_per_cta + (threadIdx.x >> p.lanes_log2); row < p.rows; row += step) {
    uint32_t token, head;
    p.heads.divmod(row, token, head);
    int64_t page;
    uint32_t slot;
    AppendFault f;
    if (!append_slot(p, token, page, slot, f)) {
      report_table_fault(p.check, f.what, kernels::kNamesAppend, -1, f.index0, f.index1, f.value, f.low, f.high);
      continue;
    }
    const char* ks = static_cast<const char*>(p.k.src) + (token * p.k.src_token + head * p.k.src_head) * ElemBytes;
    const char* vs = static_cast<const char*>(p.v.src) + (token * p.v.src_token + head * p.v.src_head) * ElemBytes;
    char* kd = static_cast<char*>(p.k.cache) +
               (page * p.k.cache_page + slot * p.k.cache_slot + head * p.k.cache_head) * ElemBytes;
    char* vd = static_cast<char*>(p.v.cache) +
               (page * p.v.cache_page + slot * p.v.cache_slot + head * p.v.cache_head) * ElemBytes;
    for (int32_t c = lane; c < p.chunks; c += lanes) {
      // Both loads before either store: two requests in flight per thread.
      const V kx = *reinterpret_cast<const V*>(ks + c * p.k.src_chunk * ElemBytes);
      const V vx = *reinterpret_cast<const V*>(vs + c * p.v.src_chunk * ElemBytes);
      *reinterpret_cast<V*>(kd + c * p.k.cache_chunk * ElemBytes) = kx;
      *reinterpret_cast<V*>(vd + c * p.v.cache_chunk * ElemBytes) = vx;
    }
  }
}

template <int ElemBytes>
ATTNJIT_DEVICE void append_paged_kv(const kernels::PageAppendParams& p) {
  switch (p.vec_bytes) {
    case 16: append_rows<ElemBytes, 16>(p); break;
    case 8: append_rows<ElemBytes, 8>(p); break;
    case 4: append_rows<ElemBytes, 4>(p); break;
    case 2: append_rows<ElemBytes, 2>(p); break;
    default:
      // The host never asks for an access narrower than an element.
      if (ElemBytes == 1) append_rows<ElemBytes, 1>(p);
      break;
  }
}

}  // namespace attnjit

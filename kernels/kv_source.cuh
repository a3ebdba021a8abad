// K/V addressing, one small type per cache layout (kv_source_params.h), so a
// skeleton is written once and instantiated per layout. A source is built
// for one request; a thread then binds the (kv head, 8-element slice) it
// loads, fixed for its lifetime, so that offset is computed once and a row
// costs one multiply-add (contiguous) or one page lookup (paged).
//
//   source(params, request)   .length()                 the request's sequence length
//                             .slice(kv_head, dim0)     this thread's part of every row
//   slice                     .row(j)                   where that part of K and V row j starts
//                             .next(a, j, will_read)    row j + 1's, from row j's address a
//                             .runs_in_page(n)          rows j .. j+n-1 (j a multiple of n) share a page:
//                             .step(a)                  then row j + 1's is one stride on, no lookup
//   Source::kAddressesFromParams  every address follows from the params alone, with no
//                                 read of device data (lengths, page tables) that the kernel
//                                 before may write: rows may be warmed in L2 before pdl_wait()
//
// Strides are read from the params at each use rather than copied: the
// params live in constant memory, so the row multiply takes its stride as a
// constant-bank operand instead of holding it in registers for the whole loop.
#pragma once
#include "fast_divmod.h"
#include "kv_source_params.h"
#include "numeric.cuh"

namespace attnjit {

struct KVRowAddress {
  const char* k;
  const char* v;
};

// One sequence with fixed row strides: exactly the addressing of a dense
// [kv_len, heads, D] or [heads, kv_len, D] tensor.
template <class KVT>
struct ContiguousKV {
  static constexpr int kBytes = storage_bytes<KVT>::value;
  static constexpr bool kAddressesFromParams = true;

  struct Slice {
    const kernels::KVSourceParams& p;
    const char* k;  // row 0
    const char* v;
    ATTNJIT_DEVICE KVRowAddress row(int j) const {
      return {k + j * p.k_stride_row * kBytes, v + j * p.v_stride_row * kBytes};
    }
    // Row j + 1 from row j's address a: one stride on. A loop over
    // consecutive rows keeps one running address instead of one offset per
    // row it unrolls (registers, in prefill).
    ATTNJIT_DEVICE KVRowAddress next(const KVRowAddress& a, int /*j*/, bool /*will_read*/) const { return step(a); }
    ATTNJIT_DEVICE KVRowAddress step(const KVRowAddress& a) const {
      return {a.k + p.k_stride_row * kBytes, a.v + p.v_stride_row * kBytes};
    }
    ATTNJIT_DEVICE bool runs_in_page(int /*n*/) const { return true; }
  };

  const kernels::KVSourceParams& p;

  ATTNJIT_DEVICE ContiguousKV(const kernels::KVSourceParams& params, int /*request: one sequence*/) : p(params) {}
  ATTNJIT_DEVICE int length() const { return p.kv_len; }
  ATTNJIT_DEVICE Slice slice(int kv_head, int dim0) const {
    return {p, static_cast<const char*>(p.k) + (kv_head * p.k_stride_head + dim0) * kBytes,
            static_cast<const char*>(p.v) + (kv_head * p.v_stride_head + dim0) * kBytes};
  }
};

// Ragged KV (batch prefill): the requests' sequences one after another in one
// [total_rows, heads, D] (or HND) tensor; request b owns rows
// indptr[b] .. indptr[b+1]. Addressed like ContiguousKV from its first row.
template <class KVT>
struct RaggedKV {
  using Slice = typename ContiguousKV<KVT>::Slice;
  static constexpr int kBytes = ContiguousKV<KVT>::kBytes;
  static constexpr bool kAddressesFromParams = false;  // the offsets are device data
  const kernels::KVSourceParams& p;
  int64_t first;
  int len;

  ATTNJIT_DEVICE RaggedKV(const kernels::KVSourceParams& params, int request)
      : p(params), first(p.indptr[request]), len(p.indptr[request + 1] - p.indptr[request]) {}
  ATTNJIT_DEVICE int length() const { return len; }
  ATTNJIT_DEVICE Slice slice(int kv_head, int dim0) const {
    return {p, static_cast<const char*>(p.k) + (first * p.k_stride_row + kv_head * p.k_stride_head + dim0) * kBytes,
            static_cast<const char*>(p.v) + (first * p.v_stride_row + kv_head * p.v_stride_head + dim0) * kBytes};
  }
};

namespace detail {

// A thread's slice of a paged cache: row j is slot j % page_size of the
// table's page j / page_size. K and V share one table unless kTwoTables.
template <int Bytes, bool kTwoTables>
struct PagedSlice {
  const kernels::KVSourceParams& p;
  const char* k;  // page 0, slot 0
  const char* v;
  const int32_t* k_pages;  // the request's page ids
  const int32_t* v_pages;  // kTwoTables only

  ATTNJIT_DEVICE PagedSlice(const kernels::KVSourceParams& params, int kv_head, int dim0, const int32_t* k_table,
                            const int32_t* v_table)
      : p(params),
        k(static_cast<const char*>(p.k) + (kv_head * p.k_stride_head + dim0) * Bytes),
        v(static_cast<const char*>(p.v) + (kv_head * p.v_stride_head + dim0) * Bytes),
        k_pages(k_table),
        v_pages(v_table) {}

  ATTNJIT_DEVICE KVRowAddress row(int j) const {
    uint32_t page, slot;
    p.page_size.divmod(uint32_t(j), page, slot);
    // 4-byte table loads, the same for a page's rows: they hit in L1.
    const int64_t k_id = k_pages[page];
    const int64_t v_id = kTwoTables ? int64_t(v_pages[page]) : k_id;
    return {k + (k_id * p.k_stride_page + int64_t(slot) * p.k_stride_row) * Bytes,
            v + (v_id * p.v_stride_page + int64_t(slot) * p.v_stride_row) * Bytes};
  }

  // Row j + 1 from row j's address a: the next slot of the same page (one
  // stride on), or the next page's first, looked up only where that row will
  // be read (its page exists in the table only then).
  ATTNJIT_DEVICE KVRowAddress next(const KVRowAddress& a, int j, bool will_read) const {
    uint32_t page, slot;
    p.page_size.divmod(uint32_t(j + 1), page, slot);
    if (slot != 0) return step(a);
    return will_read ? row(j + 1) : a;
  }
  ATTNJIT_DEVICE KVRowAddress step(const KVRowAddress& a) const {
    return {a.k + p.k_stride_row * Bytes, a.v + p.v_stride_row * Bytes};
  }
  // Page sizes are usually multiples of the rows a thread loads per tile:
  // its rows then need one page lookup per tile, not a division per row.
  ATTNJIT_DEVICE bool runs_in_page(int n) const { return p.page_size.d % uint32_t(n) == 0; }
};

}  // namespace detail

// FlashInfer's paged cache: request b owns pages indices[indptr[b] ..
// indptr[b+1]), all full but the last, which holds last_page_len[b] rows.
template <class KVT>
struct PagedKV {
  using Slice = detail::PagedSlice<storage_bytes<KVT>::value, false>;
  static constexpr bool kAddressesFromParams = false;  // the page table and lengths are device data
  const kernels::KVSourceParams& p;
  const int32_t* pages;
  int len;

  ATTNJIT_DEVICE PagedKV(const kernels::KVSourceParams& params, int request) : p(params) {
    const int first = p.indptr[request], num_pages = p.indptr[request + 1] - first;
    pages = p.indices + first;
    len = num_pages > 0 ? (num_pages - 1) * int(p.page_size.d) + p.last_page_len[request] : 0;
  }
  ATTNJIT_DEVICE int length() const { return len; }
  ATTNJIT_DEVICE Slice slice(int kv_head, int dim0) const { return Slice(p, kv_head, dim0, pages, pages); }
};

// Block tables (vLLM style): row j of request b lives in page
// table[b * table_stride + j / page_size], with separate tables for K and V
// (which may be the same array); the length is seq_lens[b].
template <class KVT>
struct BlockTableKV {
  using Slice = detail::PagedSlice<storage_bytes<KVT>::value, true>;
  static constexpr bool kAddressesFromParams = false;  // the block tables and lengths are device data
  const kernels::KVSourceParams& p;
  const int32_t* k_pages;
  const int32_t* v_pages;
  int len;

  ATTNJIT_DEVICE BlockTableKV(const kernels::KVSourceParams& params, int request)
      : p(params),
        k_pages(p.k_table + request * p.table_stride),
        v_pages(p.v_table + request * p.table_stride),
        len(p.seq_lens[request]) {}
  ATTNJIT_DEVICE int length() const { return len; }
  ATTNJIT_DEVICE Slice slice(int kv_head, int dim0) const { return Slice(p, kv_head, dim0, k_pages, v_pages); }
};

}  // namespace attnjit

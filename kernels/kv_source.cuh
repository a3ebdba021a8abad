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
//                             .report_bad_pages(len)    after the loop: records a bad page id it met (cold)
//   source(params, request, false)                      the same, recording no bad entry (another role does)
//   Source::Hint(params, request) .length()           where rows probably are, for L2 prefetches
//                             .row(kv_head, j)          sent before pdl_wait() (decode_prefetch.cuh)
//
// A hint is built while the kernel before may still write the lengths and
// page tables (an append, a new page). It reads them at the L2 (__ldcg: a
// stale line left in this SM's L1 would be read again after the wait, L1
// not being coherent), and clamps every table index and page id into its
// array (KVSourceParams::table_entries, num_pages), so a stale or garbage
// value still names memory of the cache: a wrong hint costs bandwidth,
// never a fault. Sources without one (kHints false) warm nothing.
//
// The paged and ragged sources also check what they read (a caller may
// overwrite a fixed table buffer before a graph replay, or pass device
// lengths the host never sees): a request's indptr entries and last page
// length (FlashInfer; ragged: its indptr against the tensor's rows) or its
// seq_len (block tables) once, where the source is built, and every page id
// at its lookup. A bad value is replaced by a safe one (no pages or keys, the
// clamped length, the cache's last page) and recorded (table_check.h). A
// page id costs an unsigned min and max per lookup; a thread that met a bad
// one reports its request's first after the loop (slice.report_bad_pages),
// re-reading the table there, off the hot path.
//
// Strides are read from the params at each use rather than copied: the
// params live in constant memory, so the row multiply takes its stride as a
// constant-bank operand instead of holding it in registers for the whole loop.
#pragma once
#include "fast_divmod.h"
#include "kv_source_params.h"
#include "numeric.cuh"
#include "table_check.h"

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
  static constexpr bool kHints = true;

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
    ATTNJIT_DEVICE void report_bad_pages(int /*length*/) const {}  // no page table
  };

  const kernels::KVSourceParams& p;

  ATTNJIT_DEVICE ContiguousKV(const kernels::KVSourceParams& params, int /*request: one sequence*/,
                              bool /*report: nothing to check*/ = true)
      : p(params) {}
  ATTNJIT_DEVICE int length() const { return p.kv_len; }
  ATTNJIT_DEVICE Slice slice(int kv_head, int dim0) const {
    return {p, static_cast<const char*>(p.k) + (kv_head * p.k_stride_head + dim0) * kBytes,
            static_cast<const char*>(p.v) + (kv_head * p.v_stride_head + dim0) * kBytes};
  }

  // Every address follows from the params: the hint is exact.
  struct Hint {
    const kernels::KVSourceParams& p;
    ATTNJIT_DEVICE Hint(const kernels::KVSourceParams& params, int /*request*/) : p(params) {}
    ATTNJIT_DEVICE int length() const { return p.kv_len; }
    ATTNJIT_DEVICE KVRowAddress row(int kv_head, int j) const { return ContiguousKV(p, 0).slice(kv_head, 0).row(j); }
  };
};

namespace detail {

// Request b's span of an indptr, [first, next): FlashInfer's pages
// (indices[first .. next)) or a ragged tensor's rows, checked: 0 <= first
// <= next <= entries. A bad pair is recorded (unless !report: another role
// of the CTA reads the same pair and records it) and read as a request
// without pages or keys.
ATTNJIT_DEVICE bool indptr_ok(const kernels::KVSourceParams& p, int request, int first, int next, int64_t entries,
                              bool report) {
  if (first >= 0 && first <= next && next <= entries) return true;
  if (!report) return false;
  if (first < 0 || first > entries)
    report_table_fault(p.check, kernels::kFaultIndptr, p.check_names, -1, request, -1, first, 0, entries);
  else
    report_table_fault(p.check, kernels::kFaultIndptr, p.check_names, -1, request + 1, -1, next, first, entries);
  return false;
}

}  // namespace detail

// Ragged KV (batch prefill): the requests' sequences one after another in one
// [total_rows, heads, D] (or HND) tensor of kv_len rows; request b owns rows
// indptr[b] .. indptr[b+1], checked against the tensor (in CUDA-graph mode
// indptr is the caller's buffer, which may change after plan()): a bad pair
// reads no keys. Addressed like ContiguousKV from its first row.
template <class KVT>
struct RaggedKV {
  using Slice = typename ContiguousKV<KVT>::Slice;
  static constexpr int kBytes = ContiguousKV<KVT>::kBytes;
  static constexpr bool kHints = false;  // no decode reads it
  const kernels::KVSourceParams& p;
  int64_t first;
  int len;

  ATTNJIT_DEVICE RaggedKV(const kernels::KVSourceParams& params, int request, bool report = true) : p(params) {
    int begin = p.indptr[request], next = p.indptr[request + 1];
    if (!detail::indptr_ok(p, request, begin, next, p.kv_len, report)) begin = next = 0;
    first = begin;
    len = next - begin;
  }
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
  // The largest page id this thread looked up, unsigned (a negative id is
  // past every cache): all were inside the cache while it is below
  // num_pages. A bad id reads the cache's last page instead (safe; the
  // request's result is void anyway), and the source reports after the loop.
  mutable uint32_t seen;

  ATTNJIT_DEVICE PagedSlice(const kernels::KVSourceParams& params, int kv_head, int dim0, const int32_t* k_table,
                            const int32_t* v_table)
      : p(params),
        k(static_cast<const char*>(p.k) + (kv_head * p.k_stride_head + dim0) * Bytes),
        v(static_cast<const char*>(p.v) + (kv_head * p.v_stride_head + dim0) * Bytes),
        k_pages(k_table),
        v_pages(v_table),
        seen(0) {}

  // Two integer min/max, no predicate to carry: the id clamped into the
  // cache, and the running maximum. It widens as unsigned (its upper word is
  // zero, not a sign).
  ATTNJIT_DEVICE int64_t checked(int32_t id) const {
    seen = max(seen, uint32_t(id));
    return int64_t(min(uint32_t(id), uint32_t(p.num_pages) - 1u));
  }
  ATTNJIT_DEVICE bool pages_ok() const { return seen < uint32_t(p.num_pages); }

  // After the KV loop, where this thread met a bad page id: the first bad
  // entry among the pages of a request of `length` rows is recorded, named
  // as its table names it (found from the table pointers, which the loop
  // keeps live anyway: nothing more is held across it).
  ATTNJIT_DEVICE void report_bad_pages(int length) const;

  ATTNJIT_DEVICE KVRowAddress row(int j) const {
    uint32_t page, slot;
    p.page_size.divmod(uint32_t(j), page, slot);
    // 4-byte table loads, the same for a page's rows: they hit in L1.
    const int64_t k_id = checked(k_pages[page]);
    return at(k_id, kTwoTables ? checked(v_pages[page]) : k_id, slot);
  }
  // Slot `slot` of pages k_id (K) and v_id (V).
  ATTNJIT_DEVICE KVRowAddress at(int64_t k_id, int64_t v_id, uint32_t slot) const {
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

// Table entry i (clamped into the table) and the page id it holds (clamped
// into the cache), read at the L2, for hints (see the header).
ATTNJIT_DEVICE int64_t hinted_page(const kernels::KVSourceParams& p, const int32_t* table, int64_t i) {
  const int64_t id = __ldcg(table + min(max(i, int64_t(0)), p.table_entries - 1));
  return min(max(id, int64_t(0)), int64_t(p.num_pages) - 1);
}

// Row j's hinted address: its page at entry first + j / page_size of
// k_table (and of v_table: kTwoTables).
template <int Bytes, bool kTwoTables>
ATTNJIT_DEVICE KVRowAddress hinted_row(const kernels::KVSourceParams& p, int kv_head, int j, const int32_t* k_table,
                                       const int32_t* v_table, int64_t first) {
  uint32_t page, slot;
  p.page_size.divmod(uint32_t(j), page, slot);
  const int64_t k_id = hinted_page(p, k_table, first + page);
  const int64_t v_id = kTwoTables ? hinted_page(p, v_table, first + page) : k_id;
  return PagedSlice<Bytes, kTwoTables>(p, kv_head, 0, nullptr, nullptr).at(k_id, v_id, slot);
}

// A hint's length: none without the bounds (0: unknown), so nothing is warmed.
ATTNJIT_DEVICE int hinted_length(const kernels::KVSourceParams& p, int len) {
  return p.table_entries > 0 && p.num_pages > 0 ? len : 0;
}

// Request b's last page length, checked against [1, page_size] (clamped into it;
// recorded unless !report, as for indptr_ok).
ATTNJIT_DEVICE int checked_last_len(const kernels::KVSourceParams& p, int request, bool report) {
  const int last = p.last_page_len[request], size = int(p.page_size.d);
  if (last >= 1 && last <= size) return last;
  if (report)
    report_table_fault(p.check, kernels::kFaultLastPageLen, p.check_names, -1, request, -1, last, 1, size);
  return min(max(last, 1), size);
}

// Request b's seq_len of a block table, checked against [0, max_len] (clamped into it).
ATTNJIT_DEVICE int checked_seq_len(const kernels::KVSourceParams& p, int request) {
  const int len = p.seq_lens[request];
  if (uint32_t(len) <= uint32_t(p.max_len)) return len;
  report_table_fault(p.check, kernels::kFaultLength, p.check_names, -1, request, -1, len, 0, p.max_len);
  return len < 0 ? 0 : p.max_len;
}

// The first id of table[0 .. n) outside the cache, recorded as entry
// (index0, index1 + i) of side `side`. Cold: after a lookup failed.
ATTNJIT_DEVICE bool report_first_bad_page(const kernels::KVSourceParams& p, const int32_t* table, int64_t n,
                                          int side, int64_t index0, int64_t index1) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = table[i];
    if (uint32_t(id) >= uint32_t(p.num_pages)) {
      report_table_fault(p.check, kernels::kFaultPageId, p.check_names, side, index1 < 0 ? index0 + i : index0,
                         index1 < 0 ? -1 : index1 + i, id, 0, int64_t(p.num_pages) - 1);
      return true;
    }
  }
  return false;
}

// FlashInfer's table: entry (k_pages - indices) + i of indices. A block
// table: entry [b][i] of K's table (of V's after it, when they differ),
// b = (k_pages - k_table) / table_stride.
template <int Bytes, bool kTwoTables>
ATTNJIT_DEVICE void PagedSlice<Bytes, kTwoTables>::report_bad_pages(int length) const {
  if (pages_ok()) return;
  const int64_t pages = p.page_size.div(uint32_t(max(length, 0)) + p.page_size.d - 1);
  if constexpr (!kTwoTables) {
    report_first_bad_page(p, k_pages, pages, -1, k_pages - p.indices, -1);
  } else {
    const int64_t request = (k_pages - p.k_table) / p.table_stride;
    const bool shared = p.k_table == p.v_table;
    if (!report_first_bad_page(p, k_pages, pages, shared ? -1 : 0, request, 0) && !shared)
      report_first_bad_page(p, v_pages, pages, 1, request, 0);
  }
}

// A FlashInfer request's length: all its pages full but the last, which
// holds last_len rows. last_len is read by the caller (plainly, or at the
// L2 for a hint) and only where the request has a page.
template <class LastLen>
ATTNJIT_DEVICE int paged_length(int num_pages, uint32_t page_size, LastLen last_len) {
  return num_pages > 0 ? (num_pages - 1) * int(page_size) + last_len() : 0;
}

}  // namespace detail

// FlashInfer's paged cache: request b owns pages indices[indptr[b] ..
// indptr[b+1]), all full but the last, which holds last_page_len[b] rows.
template <class KVT>
struct PagedKV {
  using Slice = detail::PagedSlice<storage_bytes<KVT>::value, false>;
  static constexpr int kBytes = storage_bytes<KVT>::value;
  static constexpr bool kHints = true;
  const kernels::KVSourceParams& p;
  const int32_t* pages;
  int len;

  ATTNJIT_DEVICE PagedKV(const kernels::KVSourceParams& params, int request, bool report = true) : p(params) {
    int first = p.indptr[request], next = p.indptr[request + 1];
    const int64_t entries = p.table_entries > 0 ? p.table_entries : int64_t(0x7fffffffffffffffLL);
    if (!detail::indptr_ok(p, request, first, next, entries, report)) first = next = 0;
    pages = p.indices + first;
    len = detail::paged_length(next - first, p.page_size.d,
                               [&] { return detail::checked_last_len(p, request, report); });
  }

  ATTNJIT_DEVICE int length() const { return len; }
  ATTNJIT_DEVICE Slice slice(int kv_head, int dim0) const { return Slice(p, kv_head, dim0, pages, pages); }

  // The table's entries are indices[0 .. table_entries): request's pages
  // start at indptr[request] (read, like its length, at the L2).
  struct Hint {
    const kernels::KVSourceParams& p;
    int64_t first;
    int len;
    ATTNJIT_DEVICE Hint(const kernels::KVSourceParams& params, int request) : p(params) {
      first = __ldcg(p.indptr + request);
      const int num_pages = int(__ldcg(p.indptr + request + 1) - first);
      len = detail::paged_length(num_pages, p.page_size.d, [&] { return __ldcg(p.last_page_len + request); });
    }
    ATTNJIT_DEVICE int length() const { return detail::hinted_length(p, len); }
    ATTNJIT_DEVICE KVRowAddress row(int kv_head, int j) const {
      return detail::hinted_row<kBytes, false>(p, kv_head, j, p.indices, nullptr, first);
    }
  };
};

// Block tables (vLLM style): row j of request b lives in page
// table[b * table_stride + j / page_size], with separate tables for K and V
// (which may be the same array); the length is seq_lens[b], read plainly
// (after pdl_wait()) or, for the hint, at the L2.
template <class KVT>
struct BlockTableKV {
  using Slice = detail::PagedSlice<storage_bytes<KVT>::value, true>;
  static constexpr int kBytes = storage_bytes<KVT>::value;
  static constexpr bool kHints = true;
  const kernels::KVSourceParams& p;
  const int32_t* k_pages;
  const int32_t* v_pages;
  int len;

  ATTNJIT_DEVICE BlockTableKV(const kernels::KVSourceParams& params, int request)
      : BlockTableKV(params, request, detail::checked_seq_len(params, request)) {}
  ATTNJIT_DEVICE BlockTableKV(const kernels::KVSourceParams& params, int request, int length)
      : p(params),
        k_pages(p.k_table + request * p.table_stride),
        v_pages(p.v_table + request * p.table_stride),
        len(length) {}
  ATTNJIT_DEVICE int length() const { return len; }
  ATTNJIT_DEVICE Slice slice(int kv_head, int dim0) const { return Slice(p, kv_head, dim0, k_pages, v_pages); }

  struct Hint;
};

// The source with its length read at the L2; a table row holds table_entries pages.
template <class KVT>
struct BlockTableKV<KVT>::Hint {
  BlockTableKV kv;
  ATTNJIT_DEVICE Hint(const kernels::KVSourceParams& params, int request)
      : kv(params, request, __ldcg(params.seq_lens + request)) {}
  ATTNJIT_DEVICE int length() const { return detail::hinted_length(kv.p, kv.len); }
  ATTNJIT_DEVICE KVRowAddress row(int kv_head, int j) const {
    return detail::hinted_row<kBytes, true>(kv.p, kv_head, j, kv.k_pages, kv.v_pages, 0);
  }
};

}  // namespace attnjit

// A PagedBatch (paged_kv_batch.hpp) on the device, for the paged GPU tests:
// q and the K and V caches as stored, out [q_rows, hq, d] in q's dtype and
// lse [q_rows, hq] float32, both poisoned so an unwritten row shows, the page
// tables (the block table and FlashInfer's indptr / indices / last_page_len)
// and the KV lengths as int32 arrays, and tensor views over them.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>

#include "attnjit/batch_decode.hpp"
#include "attnjit/tensor.hpp"
#include "support/device_buffer.hpp"
#include "support/paged_kv_batch.hpp"

namespace attnjit::test {

struct DevicePagedBatch {
  PagedBatchShape shape;
  PagedBatch host;
  DeviceBuffer q, k, v, out, lse;
  DeviceBuffer table, lens, indptr, indices, last;

  DevicePagedBatch(const PagedBatchShape& s, uint32_t seed) : DevicePagedBatch(s, make_paged_batch(s, seed)) {}
  // `b` as the test left it (e.g. V's rows replaced by K's).
  DevicePagedBatch(const PagedBatchShape& s, PagedBatch b)
      : shape(s),
        host(std::move(b)),
        q(host.qb.size()),
        k(host.kb.size()),
        v(host.vb.size()),
        out(size_t(s.q_rows) * s.hq * s.d * dtype_size(s.q)),
        lse(size_t(s.q_rows) * s.hq * 4),
        table(upload_ints(host.table)),
        lens(upload_ints(s.lens)),
        indptr(upload_ints(host.indptr)),
        indices(upload_ints(host.indices)),
        last(upload_ints(host.last)) {
    q.upload(host.qb);
    k.upload(host.kb);
    v.upload(host.vb);
    out.poison();
    lse.poison();
  }

  int64_t batch() const { return static_cast<int64_t>(shape.lens.size()); }
  // The longest request (at least 1: the entry points' max_seq_len must be positive).
  int64_t max_len() const {
    return std::max<int64_t>(1, shape.lens.empty() ? 0 : *std::max_element(shape.lens.begin(), shape.lens.end()));
  }
  // A block table row (at least 1 entry long, as the entry points need, when no request has a page).
  int max_pages() const { return std::max(1, host.max_pages); }

  TensorView q_view() const { return make_tensor(q.get(), shape.q, {shape.q_rows, shape.hq, shape.d}); }
  TensorView out_view() const { return make_tensor(out.get(), shape.q, {shape.q_rows, shape.hq, shape.d}); }
  TensorView lse_view() const { return make_tensor(lse.get(), DType::F32, {shape.q_rows, shape.hq}); }
  // k or v (or a buffer laid out like them) as a 4-D cache in the shape's layout.
  TensorView cache_view(const DeviceBuffer& cache) const {
    const int64_t P = host.num_pages, ps = shape.page_size, Hk = shape.hkv, D = shape.d;
    return shape.layout == KVLayout::NHD ? make_tensor(cache.get(), shape.kv, {P, ps, Hk, D})
                                         : make_tensor(cache.get(), shape.kv, {P, Hk, ps, D});
  }
  // FlashInfer's page table over the given caches, for BatchDecodePlan::run.
  PagedKVView paged_kv(const TensorView& k_cache, const TensorView& v_cache) const {
    PagedKVView kv;
    kv.k_cache = k_cache;
    kv.v_cache = v_cache;
    kv.indptr = indptr.as<int32_t>();
    kv.indices = indices.as<int32_t>();
    kv.last_page_len = last.as<int32_t>();
    kv.table_entries = static_cast<int64_t>(host.indices.size());
    return kv;
  }
};

}  // namespace attnjit::test

// A paged KV cache of random rows for the batch-decode GPU tests: pages
// shuffled in memory (a few no request uses), FlashInfer's page table
// (indptr / indices / last_page_len) and the equivalent block table, each
// request's rows gathered densely (NHD) for the reference, and random query
// rows. Values are the exact stored ones (reference/host_dtypes.hpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "attnjit/types.hpp"
#include "reference/host_dtypes.hpp"

namespace attnjit::test {

struct PagedBatchShape {
  std::vector<int32_t> lens;  // KV rows per request
  int page_size = 16, hq = 8, hkv = 2, d = 128;
  DType q = DType::BF16, kv = DType::BF16;
  KVLayout layout = KVLayout::NHD;
  int64_t q_rows = 0;  // query token rows (decode: one per request)
};

// The shape a test case describes: a case struct names PagedBatchShape's
// page, head, dtype and layout fields (page_size, hq, hkv, d, q, kv, layout);
// its KV lengths and query rows are given.
template <class Case>
PagedBatchShape paged_shape_of(const Case& c, std::vector<int32_t> kv_lens, int64_t q_rows) {
  return PagedBatchShape{std::move(kv_lens), c.page_size, c.hq, c.hkv, c.d, c.q, c.kv, c.layout, q_rows};
}

struct PagedBatch {
  std::vector<int32_t> indptr{0}, indices, last, table;  // table: [batch, max_pages]
  int max_pages = 0, num_pages = 0;
  std::vector<uint8_t> kb, vb, qb;                    // the cache and the query as stored
  std::vector<double> q;                              // [q_rows, hq, d]
  std::vector<std::vector<double>> k_dense, v_dense;  // per request [len, hkv, d]
};

inline PagedBatch make_paged_batch(const PagedBatchShape& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  PagedBatch b;
  const int B = static_cast<int>(c.lens.size()), ps = c.page_size, Hk = c.hkv, D = c.d;
  for (int32_t n : c.lens) {
    b.indptr.push_back(b.indptr.back() + (n + ps - 1) / ps);
    b.last.push_back(n - (n - 1) / ps * ps);
    b.max_pages = std::max(b.max_pages, b.indptr.back() - b.indptr[b.indptr.size() - 2]);
  }
  b.num_pages = b.indptr.back() + 3;  // a few pages no request uses
  std::vector<int32_t> ids(b.num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  b.indices.assign(ids.begin(), ids.begin() + b.indptr.back());
  b.table.assign(size_t(B) * b.max_pages, 0);
  for (int r = 0; r < B; ++r)
    for (int i = b.indptr[r]; i < b.indptr[r + 1]; ++i) b.table[size_t(r) * b.max_pages + i - b.indptr[r]] = b.indices[i];

  const size_t elems = size_t(b.num_pages) * ps * Hk * D;
  std::vector<float> kf(elems), vf(elems);
  for (auto& x : kf) x = 2.f * uni(rng);
  for (auto& x : vf) x = uni(rng);
  const auto k_exact = encode(c.kv, kf, b.kb), v_exact = encode(c.kv, vf, b.vb);
  const bool nhd = c.layout == KVLayout::NHD;
  auto at = [&](int page, int slot, int h) {
    return nhd ? ((size_t(page) * ps + slot) * Hk + h) * D : ((size_t(page) * Hk + h) * ps + slot) * D;
  };
  for (int r = 0; r < B; ++r) {
    std::vector<double> kd(size_t(c.lens[r]) * Hk * D), vd(kd.size());
    for (int j = 0; j < c.lens[r]; ++j)
      for (int h = 0; h < Hk; ++h) {
        const int page = b.indices[b.indptr[r] + j / ps];
        std::copy_n(&k_exact[at(page, j % ps, h)], D, &kd[(size_t(j) * Hk + h) * D]);
        std::copy_n(&v_exact[at(page, j % ps, h)], D, &vd[(size_t(j) * Hk + h) * D]);
      }
    b.k_dense.push_back(std::move(kd));
    b.v_dense.push_back(std::move(vd));
  }
  std::vector<float> qf(size_t(c.q_rows) * c.hq * D);
  for (auto& x : qf) x = 2.f * uni(rng);
  b.q = encode(c.q, qf, b.qb);
  return b;
}

}  // namespace attnjit::test

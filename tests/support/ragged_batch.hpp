// A ragged prefill batch on the host, for the prefill GPU tests: the query
// and KV indptrs from per-request lengths, random q [nq, hq, d] (in [-2, 2]),
// k [nkv, hk, d] (in [-2, 2]) and v (in [-1, 1]) drawn in that order from a
// generator seeded with `seed`, as stored and as the exact values they hold
// (reference/host_dtypes.hpp), and one request's rows for the reference.
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "attnjit/types.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {

struct RaggedBatch {
  int64_t hq = 0, hk = 0, d = 0;
  std::vector<int32_t> qo_indptr{0}, kv_indptr{0};
  int64_t nq = 0, nkv = 0;  // query and KV rows of all requests
  std::vector<uint8_t> qb, kb, vb;
  std::vector<double> q, k, v;
  std::mt19937 rng;  // after those draws: for what the test draws next (e.g. a page order)

  // Request b's rows of q, or of k or v, densely ([len, heads, d]).
  std::vector<double> q_of(size_t b) const { return rows(q, qo_indptr, b, hq); }
  std::vector<double> k_of(size_t b) const { return rows(k, kv_indptr, b, hk); }
  std::vector<double> v_of(size_t b) const { return rows(v, kv_indptr, b, hk); }

 private:
  std::vector<double> rows(const std::vector<double>& x, const std::vector<int32_t>& indptr, size_t b,
                           int64_t heads) const {
    return std::vector<double>(x.begin() + indptr[b] * heads * d, x.begin() + indptr[b + 1] * heads * d);
  }
};

// min_kv_rows: K and V hold at least this many rows (a batch with no KV still
// gets a tensor to point at).
inline RaggedBatch make_ragged_batch(uint32_t seed, const std::vector<int32_t>& qo_lens,
                                     const std::vector<int32_t>& kv_lens, int hq, int hk, int d, DType dt,
                                     int64_t min_kv_rows = 0) {
  RaggedBatch r;
  r.hq = hq;
  r.hk = hk;
  r.d = d;
  r.rng.seed(seed);
  for (size_t b = 0; b < qo_lens.size(); ++b) {
    r.qo_indptr.push_back(r.qo_indptr.back() + qo_lens[b]);
    r.kv_indptr.push_back(r.kv_indptr.back() + kv_lens[b]);
  }
  r.nq = r.qo_indptr.back();
  r.nkv = r.kv_indptr.back();
  const int64_t kv_rows = std::max(r.nkv, min_kv_rows);
  r.q = encode(dt, random_values(r.rng, r.nq * hq * d, 2.f), r.qb);
  r.k = encode(dt, random_values(r.rng, kv_rows * hk * d, 2.f), r.kb);
  r.v = encode(dt, random_values(r.rng, kv_rows * hk * d, 1.f), r.vb);
  return r;
}

}  // namespace attnjit::test

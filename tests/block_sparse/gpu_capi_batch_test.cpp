// Block sparsity through the C API's ragged batch prefill wrapper (on the
// GPU): a variant from JSON (block_sparse, heads_vary false, reclassify
// on_bind) with a per-request doc-id tensor (b is the request) against the
// same mask without block sparsity, at ragged lengths no multiple of a tile,
// a request of one token and GQA group 3; then a bind of new doc ids is seen
// by the next run of the same plan. The float64 references are the Python
// tests' (tools/python/tests/test_block_sparse.py).
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_variant.h"
#include "cuda/driver.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/sample_values.hpp"
#include "support/c_runtime.hpp"
#include "support/device_buffer.hpp"
#include "support/dltensor_maker.hpp"
#include "support/gpu_support.hpp"

namespace attnjit::test {

namespace {

const char* kMask = "const int pos = q + p.offset_at(b); return kv <= pos && p.doc_at(b, kv) == p.doc_at(b, pos);";

std::string source(bool sparse) {
  std::string j = std::string(R"({"mask_mod": ")") + kMask +
                  R"(", "params": [{"name": "doc", "type": "i32", "rank": 2}, {"name": "offset", "type": "i32", "rank": 1}])";
  if (sparse) j += R"(, "block_sparse": true, "heads_vary": false, "reclassify": "on_bind")";
  return j + "}";
}

}  // namespace

TEST_CASE("C API: a block-sparse variant on the ragged batch prefill wrapper, and on_bind's rebind",
          "[gpu][block_sparse][capi]") {
  ATTNJIT_REQUIRE_GPU();
  CRuntime rt;
  cuda::ScopedDevice scope(0);
  const std::vector<int32_t> qo_lens = {100, 1, 263, 37}, kv_lens = {150, 1, 263, 300};
  const int H = 12, Hk = 4, D = 128, batch = 4, longest = 300;
  std::vector<int32_t> qo_indptr = {0}, kv_indptr = {0}, offset;
  for (int b = 0; b < batch; ++b) {
    qo_indptr.push_back(qo_indptr.back() + qo_lens[b]);
    kv_indptr.push_back(kv_indptr.back() + kv_lens[b]);
    offset.push_back(kv_lens[b] - qo_lens[b]);
  }
  const int64_t M = qo_indptr.back(), N = kv_indptr.back();
  auto doc_ids = [&](int width) {
    std::vector<int32_t> d(size_t(batch) * longest);
    for (int b = 0; b < batch; ++b)
      for (int i = 0; i < longest; ++i) d[size_t(b) * longest + i] = i / (width + 7 * b);
    return d;
  };
  DeviceBuffer ddoc(size_t(batch) * longest * 4), doff(batch * 4);
  ddoc.upload(doc_ids(53));
  doff.upload(offset);
  DLTensorMaker tdoc({batch, longest}, kI32), toff({batch}, kI32);
  tdoc.data(ddoc.get());
  toff.data(doff.get());

  std::mt19937 rng(31);
  const DType dt = DType::F16;
  std::vector<uint8_t> qb, kb, vb;
  encode(dt, random_values(rng, M * H * D, 2.f), qb);
  encode(dt, random_values(rng, N * Hk * D, 2.f), kb);
  encode(dt, random_values(rng, N * Hk * D, 2.f), vb);
  DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), dout(M * H * D * 2), ws(64 << 20);
  dq.upload(qb);
  dk.upload(kb);
  dv.upload(vb);
  DLTensorMaker q({M, H, D}, kF16), k({N, Hk, D}, kF16), v({N, Hk, D}, kF16), o({M, H, D}, kF16);
  q.data(dq.get());
  k.data(dk.get());
  v.data(dv.get());
  o.data(dout.get());

  auto variant = [&](bool sparse) {
    attnjit_variant_t* var = nullptr;
    REQUIRE(attnjit_variant_create_from_json(source(sparse).c_str(), &var) == ATTNJIT_OK);
    REQUIRE(attnjit_variant_bind_tensor(var, "doc", tdoc.get()) == ATTNJIT_OK);
    REQUIRE(attnjit_variant_bind_tensor(var, "offset", toff.get()) == ATTNJIT_OK);
    return var;
  };
  attnjit_variant_t* sparse = variant(true);
  attnjit_variant_t* dense = variant(false);
  auto planned = [&](attnjit_variant_t* var) {
    attnjit_batch_prefill_t* w = nullptr;
    INFO(attnjit_last_error());
    REQUIRE(attnjit_batch_prefill_create_v2(rt.rt, 0, ws.get(), ws.bytes(), ATTNJIT_KV_LAYOUT_NHD, "auto", 0, 0,
                                            nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &w) == ATTNJIT_OK);
    attnjit_prefill_options_t opts;
    attnjit_prefill_options_init(&opts);
    opts.causal = 0;
    opts.variant = var;
    REQUIRE(attnjit_batch_prefill_plan(w, qo_indptr.data(), kv_indptr.data(), batch, nullptr, 0, nullptr, 0, H, Hk,
                                       D, &opts, "float16", nullptr, nullptr, 0, nullptr) == ATTNJIT_OK);
    return w;
  };
  auto run = [&](attnjit_batch_prefill_t* w) {
    INFO(attnjit_last_error());
    REQUIRE(attnjit_batch_prefill_run(w, q.get(), k.get(), v.get(), o.get(), nullptr, nullptr) == ATTNJIT_OK);
    ATTNJIT_CU(cuda::driver().CtxSynchronize());
    return decode(dt, dout.download());
  };
  attnjit_batch_prefill_t* ws_sparse = planned(sparse);
  attnjit_batch_prefill_t* ws_dense = planned(dense);
  const std::vector<double> got = run(ws_sparse), want = run(ws_dense);
  for (double x : got) REQUIRE(std::isfinite(x));
  CHECK(relative_l2(got, want) < 1e-3);

  // New doc ids, bound anew (on_bind: the bind is what is seen): both plans follow them.
  ddoc.upload(doc_ids(101));
  REQUIRE(attnjit_variant_bind_tensor(sparse, "doc", tdoc.get()) == ATTNJIT_OK);
  const std::vector<double> got2 = run(ws_sparse), want2 = run(ws_dense);
  CHECK(relative_l2(want2, want) > 0.05);  // the masks differ
  CHECK(relative_l2(got2, want2) < 1e-3);

  attnjit_batch_prefill_destroy(ws_sparse);
  attnjit_batch_prefill_destroy(ws_dense);
  attnjit_variant_destroy(sparse);
  attnjit_variant_destroy(dense);
}

}  // namespace attnjit::test

// User variants (issue 31) on the GPU, through the C++ API, against a float64
// reference on random inputs and against the built-in twin of each snippet:
//  * single prefill: document masking over packed sequences (a mask_mod over a
//    doc-ids tensor) with ALiBi as a score_mod (a slopes tensor), against the
//    reference with ALiBi and the doc-causal mask, and against the built-in
//    ALiBi with that mask packed; then the doc ids rebound (one document: plain
//    causal) and run again on the same plan. fa2, auto, and fa3 on sm_90a.
//  * batch decode: a speculative-decoding tree mask (a mask_mod over (b, q,
//    kv) with a per-request ancestor tensor) with several query tokens per
//    request, against the reference and against the built-in draft-tree mask.
// Output is poisoned first, so a row left unwritten fails. Skips without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attnjit/attnjit.hpp"
#include "cuda/driver.hpp"
#include "support/decode_entry_args.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "support/paged_kv_batch.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/prefill_reference.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {
namespace {

DLTensor dl_of(void* data, DLDataType dtype, std::vector<int64_t>& shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCUDA, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = shape.data();
  return t;  // strides null: row-major
}

template <class T>
DeviceBuffer upload_pod(const std::vector<T>& v) {
  DeviceBuffer d(std::max<size_t>(v.size() * sizeof(T), 1));
  std::vector<uint8_t> bytes(v.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  if (!bytes.empty()) d.upload(bytes);
  return d;
}

double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// attnjit's (and FlashInfer's) ALiBi slope of head h of n.
float alibi_slope(int h, int n) {
  const int p = 1 << int(std::floor(std::log2(double(n))));
  return h < p ? float(std::exp2(-8.0 / p * (h + 1))) : float(std::exp2(-4.0 / p * (2 * (h - p) + 1)));
}

const char* kDocumentsMask = "return p.doc_at(q) == p.doc_at(kv) && kv <= q;";
const char* kAlibiScore = "return s + p.slope_at(h) * float(kv - q);";

}  // namespace

TEST_CASE("user variant, single prefill: document mask_mod + ALiBi score_mod against float64 and the built-ins",
          "[gpu][user_variant][prefill]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  cuda::ScopedDevice scope(0);
  const std::vector<int> docs = {100, 37, 279, 1, 100};
  int64_t N = 0;
  for (int n : docs) N += n;
  const int64_t H = 12, Hk = 4, D = 128;
  std::vector<int32_t> doc;
  for (size_t i = 0; i < docs.size(); ++i) doc.insert(doc.end(), docs[i], int32_t(i));
  std::vector<float> slopes(H);
  for (int h = 0; h < H; ++h) slopes[h] = alibi_slope(h, int(H));
  const DeviceBuffer ddoc = upload_pod(doc), done_doc = upload_pod(std::vector<int32_t>(N, 0)),
                     dslopes = upload_pod(slopes);
  std::vector<int64_t> doc_shape{N}, slope_shape{H};
  const DLTensor tdoc = dl_of(ddoc.get(), {kDLInt, 32, 1}, doc_shape);
  const DLTensor tone = dl_of(done_doc.get(), {kDLInt, 32, 1}, doc_shape);
  const DLTensor tslopes = dl_of(dslopes.get(), {kDLFloat, 32, 1}, slope_shape);

  std::vector<std::string> backends = {"fa2", "auto"};
  if (rt.default_arch() == "sm_90a") backends.push_back("fa3");
  for (DType dt : {DType::F16, DType::BF16})
    for (const std::string& backend : backends) {
      INFO(to_string(dt) << " backend=" << backend);
      std::mt19937 rng(17);
      auto randv = [&](size_t n) { return random_values(rng, n, 2.f); };
      std::vector<uint8_t> qb, kb, vb;
      const auto q = encode(dt, randv(N * H * D), qb);
      const auto k = encode(dt, randv(N * Hk * D), kb);
      const auto v = encode(dt, randv(N * Hk * D), vb);
      DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), dout(N * H * D * 2), dtwin(N * H * D * 2);
      dq.upload(qb);
      dk.upload(kb);
      dv.upload(vb);

      auto variant = std::make_shared<Variant>(
          kAlibiScore, kDocumentsMask,
          std::vector<VariantParam>{{"doc", VariantParamType::I32, 1}, {"slope", VariantParamType::F32, 1}});
      variant->bind("doc", &tdoc);
      variant->bind("slope", &tslopes);
      SinglePrefillProblem p;
      p.num_qo_heads = int(H);
      p.num_kv_heads = int(Hk);
      p.head_dim = int(D);
      p.qo_len = p.kv_len = N;
      p.q_dtype = p.kv_dtype = dt;
      p.options.backend = backend;
      p.options.variant = variant;
      SinglePrefillPlan plan(rt, p);
      CHECK(plan.describe().find("_user") != std::string::npos);
      DeviceBuffer ws(std::max<size_t>(plan.workspace_bytes(), 1));
      const TensorView tq = make_tensor(dq.get(), dt, {N, H, D}), tk = make_tensor(dk.get(), dt, {N, Hk, D}),
                       tv = make_tensor(dv.get(), dt, {N, Hk, D}), to = make_tensor(dout.get(), dt, {N, H, D});

      // The built-in twin and the reference: ALiBi with the doc-causal mask packed.
      std::vector<bool> mask(size_t(N * N));
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < N; ++j) mask[size_t(i * N + j)] = doc[i] == doc[j] && j <= i;
      PrefillOptions twin_options;
      twin_options.backend = backend;
      twin_options.pos_encoding_mode = PosEncoding::Alibi;
      twin_options.custom_mask = true;
      const PrefillRequestShape shape{int(H), int(Hk), int(D), N, N};

      for (bool one_document : {false, true}) {
        INFO((one_document ? "rebound: one document (causal)" : "five documents"));
        if (one_document) {
          variant->bind("doc", &tone);  // the same plan reads the new ids at its next run
          std::fill(mask.begin(), mask.end(), false);
          for (int64_t i = 0; i < N; ++i)
            for (int64_t j = 0; j <= i; ++j) mask[size_t(i * N + j)] = true;
        }
        dout.poison();
        plan.run(tq, tk, tv, to, nullptr, nullptr, ws.get(), ws.bytes(), nullptr);
        ATTNJIT_CU(cuda::driver().CtxSynchronize());
        const auto out = decode(dt, dout.download());
        const auto ref = reference_prefill(shape, twin_options, q, k, v, &mask);
        const double tol = dt == DType::BF16 ? 1.5e-2 : 3e-3;
        CHECK(rel_l2(out, ref.o) < tol);

        const auto twin_packed = pack_custom_mask(mask);
        const DeviceBuffer dtwin_mask = upload_pod(twin_packed);
        const PackedMask twin_pm{dtwin_mask.get(), twin_packed.size()};
        dtwin.poison();
        single_prefill_with_kv_cache(rt, tq, tk, tv, make_tensor(dtwin.get(), dt, {N, H, D}), nullptr, twin_options,
                                     nullptr, &twin_pm);
        ATTNJIT_CU(cuda::driver().CtxSynchronize());
        const auto twin = decode(dt, dtwin.download());
        CHECK(rel_l2(out, twin) < (dt == DType::BF16 ? 1e-2 : 2e-3));
      }
    }
}

TEST_CASE("user variant, batch decode: a speculative tree mask_mod against float64 and the built-in draft mask",
          "[gpu][user_variant][decode]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  cuda::ScopedDevice scope(0);
  const std::vector<int32_t> kv_lens = {37, 300, 1000, 9};
  const int B = int(kv_lens.size()), Q = 4, H = 8, Hk = 2, D = 128, ps = 16;
  const DType dt = DType::BF16;
  const PagedBatchShape shape{kv_lens, ps, H, Hk, D, dt, dt, KVLayout::NHD, int64_t(B) * Q};
  const PagedBatch b = make_paged_batch(shape, 23);
  const int64_t T = int64_t(B) * Q, P = b.num_pages;

  // A random draft tree per request: token c's parent is a token before it (or the prefix);
  // tree[b][t][c] = 1 when draft token c is t or one of its ancestors.
  std::mt19937 rng(29);
  std::vector<uint8_t> tree(size_t(B) * Q * Q, 0);
  std::vector<uint32_t> draft_words(size_t(T), 0);  // the built-in's rows: bit c of token row t
  for (int r = 0; r < B; ++r) {
    std::vector<int> parent(Q);
    for (int c = 0; c < Q; ++c) parent[c] = c == 0 ? -1 : std::uniform_int_distribution<int>(-1, c - 1)(rng);
    for (int t = 0; t < Q; ++t)
      for (int c = t; c >= 0; c = parent[c]) {
        tree[(size_t(r) * Q + t) * Q + c] = 1;
        draft_words[size_t(r) * Q + t] |= 1u << c;
      }
  }
  const DeviceBuffer dtree = upload_pod(tree), dlens = upload_pod(kv_lens), dwords = upload_pod(draft_words);
  std::vector<int64_t> tree_shape{B, Q, Q}, lens_shape{B};
  const DLTensor ttree = dl_of(dtree.get(), {kDLUInt, 8, 1}, tree_shape);
  const DLTensor tlens = dl_of(dlens.get(), {kDLInt, 32, 1}, lens_shape);
  auto variant = std::make_shared<Variant>(
      "", "const int first = p.kv_len_at(b) - p.drafts;\nreturn kv < first || p.tree_at(b, q, kv - first) != 0;",
      std::vector<VariantParam>{{"tree", VariantParamType::U8, 3},
                                {"kv_len", VariantParamType::I32, 1},
                                {"drafts", VariantParamType::I32, 0}});
  variant->bind("tree", &ttree);
  variant->bind("kv_len", &tlens);
  variant->bind("drafts", int32_t(Q));

  DeviceBuffer dq(b.qb.size()), dk(b.kb.size()), dv(b.vb.size()), dout(T * H * D * 2), dtwin(T * H * D * 2),
      ws(256 << 20);
  dq.upload(b.qb);
  dk.upload(b.kb);
  dv.upload(b.vb);
  const DeviceBuffer indptr = upload_ints(b.indptr), indices = upload_ints(b.indices), last = upload_ints(b.last);
  PagedKVView kv;
  kv.k_cache = make_tensor(dk.get(), dt, {P, ps, Hk, D});
  kv.v_cache = make_tensor(dv.get(), dt, {P, ps, Hk, D});
  kv.indptr = static_cast<const int32_t*>(indptr.get());
  kv.indices = static_cast<const int32_t*>(indices.get());
  kv.last_page_len = static_cast<const int32_t*>(last.get());
  kv.table_entries = int64_t(b.indices.size());
  const TensorView tq = make_tensor(dq.get(), dt, {T, H, D});

  auto run = [&](bool snippet, DeviceBuffer& out) {
    BatchDecodeProblem p = batch_decode_problem(shape);
    p.q_len_per_req = Q;
    if (snippet) p.options.variant = variant;
    else p.draft_mask = true;
    BatchDecodePlan plan(rt, p);
    plan.plan(kv_lens.data(), B, nullptr);
    BatchDecodeLaunchExtras extras;
    if (!snippet) extras.draft_mask = static_cast<const uint32_t*>(dwords.get());
    if (!snippet) extras.draft_mask_row_words = 1;
    out.poison();
    plan.run(tq, kv, make_tensor(out.get(), dt, {T, H, D}), nullptr, ws.get(), ws.bytes(), nullptr, 1.f, 1.f,
             extras);
    ATTNJIT_CU(cuda::driver().CtxSynchronize());
    if (snippet) CHECK(plan.describe().find("_user") != std::string::npos);
    return decode(dt, out.download());
  };
  const auto out = run(true, dout);

  // float64: token t of request r sees the prefix and its tree's draft tokens.
  std::vector<double> ref(size_t(T) * H * D, 0.0);
  const double scale = 1.0 / std::sqrt(double(D));
  for (int r = 0; r < B; ++r) {
    const int L = kv_lens[r], first = L - Q;
    for (int t = 0; t < Q; ++t)
      for (int h = 0; h < H; ++h) {
        const int hk = h / (H / Hk);
        const double* qv = &b.q[((size_t(r) * Q + t) * H + h) * D];
        std::vector<double> s;
        std::vector<int> keys;
        for (int j = 0; j < L; ++j) {
          if (j >= first && !tree[(size_t(r) * Q + t) * Q + (j - first)]) continue;
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += qv[d] * b.k_dense[r][(size_t(j) * Hk + hk) * D + d];
          s.push_back(dot * scale);
          keys.push_back(j);
        }
        const double m = *std::max_element(s.begin(), s.end());
        double z = 0;
        for (double& x : s) z += (x = std::exp(x - m));
        double* o = &ref[((size_t(r) * Q + t) * H + h) * D];
        for (size_t i = 0; i < keys.size(); ++i)
          for (int d = 0; d < D; ++d) o[d] += s[i] / z * b.v_dense[r][(size_t(keys[i]) * Hk + hk) * D + d];
      }
  }
  CHECK(rel_l2(out, ref) < 1.5e-2);
  const auto twin = run(false, dtwin);
  CHECK(rel_l2(out, twin) < 1e-2);
}

}  // namespace attnjit::test

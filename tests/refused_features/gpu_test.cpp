// What attnjit used to refuse where FlashInfer 0.7.2 computes (issue 29), on
// the GPU against a float64 reference written from the definition:
//  - requests with no KV (indptr step 0 / seq_len 0) in batch decode through
//    FlashInfer's wrapper, TensorRT-LLM's and cuDNN's entry points (split
//    and unsplit neighbours) and in batch prefill (ragged, paged);
//  - causal prefill with qo_len > kv_len (single, ragged, paged);
//  - head_dim 512 decode (single, the wrapper, TensorRT-LLM's, split KV);
//  - several query tokens per request at head_dim 256 and 512 (TensorRT-LLM's
//    uniform and per-request lengths, a host-length plan; windows);
//  - TensorRT-LLM's draft-tree mask (tensor and CUDA cores) and its
//    single-tensor cache [pages, 1, ...] (K and V one tensor).
// A row that sees no key must be exactly 0 with lse -inf. Output is poisoned
// first, so an unwritten row fails; lse by absolute error in base 2.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include "attnjit/attnjit.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "support/decode_entry_args.hpp"
#include "support/paged_kv_device.hpp"
#include "support/ragged_batch.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/prefill_reference.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {
namespace {

struct RowRef {
  std::vector<double> o;
  double lse = -INFINITY;  // base 2
};

// One query row against a request's dense rows k/v [len, hkv, d] (NHD), KV
// head hk; keep(j) says which keys it sees.
RowRef attend(const double* q, const std::vector<double>& k, const std::vector<double>& v, int len, int hkv, int hk,
              int d, double sm_scale, const std::function<bool(int)>& keep) {
  RowRef r;
  r.o.assign(d, 0.0);
  std::vector<double> s(len, -INFINITY);
  double m = -INFINITY;
  for (int j = 0; j < len; ++j) {
    if (!keep(j)) continue;
    const double* kr = &k[(size_t(j) * hkv + hk) * d];
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += q[i] * kr[i];
    s[j] = dot * sm_scale;
    m = std::max(m, s[j]);
  }
  if (m == -INFINITY) return r;
  double den = 0;
  for (int j = 0; j < len; ++j) {
    if (s[j] == -INFINITY) continue;
    const double w = std::exp(s[j] - m);
    den += w;
    for (int i = 0; i < d; ++i) r.o[i] += w * v[(size_t(j) * hkv + hk) * d + i];
  }
  for (auto& x : r.o) x /= den;
  r.lse = (m + std::log(den)) / std::log(2.0);
  return r;
}

struct Check {
  double o_rel = 0, lse_abs = 0;
  int bad_empty = 0;  // rows that see no key but are not exactly 0 / -inf
  void row(const RowRef& ref, const double* o, const double* lse, int d) {
    if (ref.lse == -INFINITY) {
      bool ok = !lse || (std::isinf(*lse) && *lse < 0);
      for (int i = 0; i < d; ++i) ok = ok && o[i] == 0.0;
      bad_empty += !ok;
      return;
    }
    double num = 0, den = 0;
    for (int i = 0; i < d; ++i) {
      if (!std::isfinite(o[i])) num = INFINITY;
      num += (o[i] - ref.o[i]) * (o[i] - ref.o[i]);
      den += ref.o[i] * ref.o[i];
    }
    o_rel = std::max(o_rel, std::sqrt(num / std::max(den, 1e-30)));
    if (lse) lse_abs = std::max(lse_abs, std::isfinite(*lse) ? std::fabs(*lse - ref.lse) : INFINITY);
  }
};

double o_tol(DType q) { return q == DType::BF16 ? 1e-2 : 2e-3; }
double lse_tol(DType q) { return q == DType::BF16 ? 2e-2 : 4e-3; }

enum class Entry { FlashInfer, TrtLlm, Cudnn, Plan };
const char* name(Entry e) {
  return e == Entry::FlashInfer ? "flashinfer" : e == Entry::TrtLlm ? "trtllm" : e == Entry::Cudnn ? "cudnn" : "plan";
}

struct DecodeCase {
  Entry entry = Entry::FlashInfer;
  std::vector<int32_t> kv_lens, q_lens;  // q_lens empty: one token per request
  bool variable_q = false;               // TensorRT-LLM: cum_seq_lens_q + max_q_len
  int hq = 8, hkv = 2, d = 128, page_size = 16;
  DType q = DType::BF16, kv = DType::BF16;
  KVLayout layout = KVLayout::HND;
  bool tc = false;
  int window_left = -1;
  bool draft_mask = false;  // TensorRT-LLM: a random tree mask over each request's draft tokens
  bool one_tensor = false;  // TensorRT-LLM: K and V the same tensor ([pages, 1, ...])

  int tokens(size_t r) const { return q_lens.empty() ? 1 : q_lens[r]; }
  int64_t total_tokens() const {
    int64_t n = 0;
    for (size_t r = 0; r < kv_lens.size(); ++r) n += tokens(r);
    return n;
  }
  int max_q() const { return q_lens.empty() ? 1 : *std::max_element(q_lens.begin(), q_lens.end()); }
  std::string label() const {
    return fmt::format("{} kv_lens={} q_lens={}{} {}q/{}kv d={} ps={} {}/{} tc={} window={} draft={} one_tensor={}",
                       name(entry), kv_lens, q_lens, variable_q ? " (cum)" : "", hq, hkv, d, page_size, to_string(q),
                       to_string(kv), tc, window_left, draft_mask, one_tensor);
  }
};

Check run_decode(const Runtime& rt, const DecodeCase& c, uint32_t seed) {
  cuda::ScopedDevice scope(0);
  const PagedBatchShape shape = paged_shape_of(c, c.kv_lens, c.total_tokens());
  PagedBatch host = make_paged_batch(shape, seed);
  if (c.one_tensor) {  // V is K: the reference reads K's values for both
    host.vb = host.kb;
    host.v_dense = host.k_dense;
  }
  DevicePagedBatch d(shape, std::move(host));
  const PagedBatch& b = d.host;
  const int64_t B = d.batch(), T = c.total_tokens(), H = c.hq, Hk = c.hkv, D = c.d, ps = c.page_size,
                P = b.num_pages, Q = c.max_q();
  const int words = (int(Q) + 31) / 32;
  std::mt19937 rng(seed * 7 + 1);
  // The draft mask: token t sees draft token c <= t with probability 1/2, itself always (a tree).
  std::vector<uint32_t> mask(size_t(T) * words, 0);
  {
    int64_t row = 0;
    for (int64_t r = 0; r < B; ++r)
      for (int t = 0; t < c.tokens(r); ++t, ++row)
        for (int cc = 0; cc <= t; ++cc)
          if (cc == t || rng() % 2) mask[size_t(row) * words + cc / 32] |= 1u << (cc % 32);
  }
  DeviceBuffer dmask(std::max<size_t>(4, mask.size() * 4));
  {
    std::vector<uint8_t> bytes(dmask.bytes(), 0);
    std::memcpy(bytes.data(), mask.data(), mask.size() * 4);
    dmask.upload(bytes);
  }
  const bool nhd = c.layout == KVLayout::NHD;
  const TensorView tq = d.q_view();
  TensorView tk = d.cache_view(d.k), tv = d.cache_view(d.v);
  if (c.one_tensor) {  // FlashInfer's [pages, 1, ...] read as (K, V): one tensor for both
    const int64_t shape5[5] = {P, 1, nhd ? ps : Hk, nhd ? Hk : ps, D};
    const int64_t strides5[5] = {ps * Hk * D, ps * Hk * D, tk.strides[1], tk.strides[2], 1};
    std::tie(tk, tv) = kv_cache_halves(d.k.get(), c.kv, shape5, strides5);
    REQUIRE(tv.data == tk.data);
  }
  const TensorView to = d.out_view(), tl = d.lse_view();
  DeviceBuffer ws(256 << 20);
  std::vector<int32_t> cum{0};
  for (int64_t r = 0; r < B; ++r) cum.push_back(cum.back() + c.tokens(r));
  const DeviceBuffer dcum = upload_ints(cum);
  const float scale = 1.f / std::sqrt(float(D));
  const bool with_lse = c.entry != Entry::Cudnn;
  switch (c.entry) {
    case Entry::FlashInfer: {
      BatchDecodeWithPagedKVCacheWrapper w(rt, ws.get(), ws.bytes(), c.layout, false, c.tc);
      w.plan(b.indptr, b.indices, b.last, wrapper_plan_args(shape, c.window_left));
      w.run(tq, tk, tv, to, &tl);
      break;
    }
    case Entry::Plan: {  // host lengths, several tokens: the work list and the in-kernel merge
      BatchDecodeProblem p = batch_decode_problem(shape);
      p.options.window_left = c.window_left;
      p.options.use_tensor_cores = c.tc;
      p.options.return_lse = true;
      p.q_len_per_req = static_cast<int>(Q);
      BatchDecodePlan plan(rt, p);
      plan.plan(c.kv_lens.data(), static_cast<int>(B), nullptr);
      plan.run(tq, d.paged_kv(tk, tv), to, &tl, ws.get(), ws.bytes(), nullptr);
      break;
    }
    case Entry::TrtLlm: {
      TrtllmDecodeArgs a = trtllm_args(d);
      a.window_left = c.window_left;
      a.use_tensor_cores = c.tc;
      if (c.variable_q) {
        a.cum_seq_lens_q = dcum.as<int32_t>();
        a.max_q_len = static_cast<int>(Q);
        a.batch_size = static_cast<int>(B);
      } else {
        a.q_len_per_req = static_cast<int>(Q);
      }
      if (c.draft_mask) {
        a.mask = dmask.as<uint32_t>();
        a.mask_row_words = words;
      }
      trtllm_batch_decode_with_kv_cache(rt, tq, tk, tv, ws.get(), ws.bytes(), a, to, &tl);
      break;
    }
    case Entry::Cudnn:
      cudnn_batch_decode_with_kv_cache(rt, tq, tk, tv, ws.get(), ws.bytes(), cudnn_args(d), to);
      break;
  }
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  const auto out = decode(c.q, d.out.download());
  const auto lse = decode(DType::F32, d.lse.download());
  Check ck;
  int64_t row = 0;
  for (int64_t r = 0; r < B; ++r) {
    const int L = c.kv_lens[r], Qr = c.tokens(r);
    for (int t = 0; t < Qr; ++t, ++row) {
      const int pos = L - Qr + t, first = L - Qr;
      for (int h = 0; h < H; ++h) {
        const int hk = h / (H / Hk);
        const auto keep = [&](int j) {
          if (j > pos && !c.draft_mask) return false;
          if (c.window_left >= 0 && j < pos - c.window_left) return false;
          if (c.draft_mask && j >= first) return ((mask[size_t(row) * words + (j - first) / 32] >> ((j - first) % 32)) & 1u) != 0;
          return true;
        };
        const RowRef ref = attend(&b.q[(size_t(row) * H + h) * D], b.k_dense[r], b.v_dense[r], L, int(Hk), hk, int(D),
                                  scale, keep);
        ck.row(ref, &out[(size_t(row) * H + h) * D], with_lse ? &lse[size_t(row) * H + h] : nullptr, int(D));
      }
    }
  }
  return ck;
}

// fp8 KV rounds K and V to 3 or 2 mantissa bits: o is held to 2e-2 there.
void expect_good(const DecodeCase& c, const Check& e) {
  INFO(c.label() << ": o_rel " << e.o_rel << " lse_abs " << e.lse_abs << " bad empty rows " << e.bad_empty);
  CHECK(e.bad_empty == 0);
  CHECK(e.o_rel < (dtype_size(c.kv) == 1 ? 2e-2 : o_tol(c.q)));
  CHECK(e.lse_abs < lse_tol(c.q));
}

// Each case on the GPU (the test skips without one), seeds from `seed` on.
void expect_all_good(const std::vector<DecodeCase>& cases, uint32_t seed) {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  for (const auto& c : cases) expect_good(c, run_decode(rt, c, seed++));
}

}  // namespace

TEST_CASE("batch decode: requests with no KV give o = 0 and lse = -inf", "[gpu][refused]") {
  std::vector<DecodeCase> cases;
  for (Entry e : {Entry::FlashInfer, Entry::TrtLlm, Entry::Cudnn})
    for (bool tc : {false, true}) {
      DecodeCase c;
      c.entry = e;
      c.tc = tc;
      c.hq = tc ? 32 : 5;
      c.hkv = tc ? 8 : 5;
      c.kv_lens = {0, 37, 0, 1, 0};
      c.layout = e == Entry::FlashInfer ? KVLayout::NHD : KVLayout::HND;
      cases.push_back(c);
      c.kv_lens = {0, 20000, 0, 77, 0, 0};  // a split request beside empty ones (merge kernel / in-kernel merge)
      c.page_size = 1;
      cases.push_back(c);
    }
  {
    DecodeCase c;  // all empty
    c.entry = Entry::FlashInfer;
    c.kv_lens = {0, 0, 0};
    cases.push_back(c);
    c.entry = Entry::TrtLlm;
    cases.push_back(c);
  }
  {
    DecodeCase c;  // speculative tokens of an empty request
    c.entry = Entry::TrtLlm;
    c.kv_lens = {0, 300, 0};
    c.q_lens = {3, 3, 3};
    c.tc = true;
    cases.push_back(c);
  }
  expect_all_good(cases, 11);
}

TEST_CASE("decode at head_dim 512 matches the float64 reference", "[gpu][refused]") {
  std::vector<DecodeCase> cases;
  int turn = 0;
  for (Entry e : {Entry::FlashInfer, Entry::TrtLlm, Entry::Cudnn})
    for (int group : {1, 4, 5}) {
      DecodeCase c;
      c.entry = e;
      c.d = 512;
      c.hkv = 2;
      c.hq = 2 * group;
      c.q = turn % 2 ? DType::F16 : DType::BF16;
      c.kv = turn % 3 == 2 ? DType::E4M3 : c.q;
      c.tc = turn % 2 == 1;  // asked for, but 512 runs on CUDA cores
      c.layout = turn % 2 && e != Entry::Cudnn ? KVLayout::NHD : KVLayout::HND;  // cuDNN's cache is HND
      c.kv_lens = turn % 2 ? std::vector<int32_t>{1, 333, 4097} : std::vector<int32_t>{9000, 17};
      c.window_left = e != Entry::Cudnn && turn == 4 ? 100 : -1;
      cases.push_back(c);
      ++turn;
    }
  expect_all_good(cases, 41);
  // Single decode, split over the SMs (the merge kernel at 512).
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  for (int kv_len : {1, 1000, 33000}) {
    cuda::ScopedDevice scope(0);
    const int H = 8, Hk = 2, D = 512;
    std::mt19937 rng(kv_len);
    std::vector<uint8_t> qb, kb, vb;
    const auto q = encode(DType::BF16, random_values(rng, H * D, 2.f), qb);
    const auto k = encode(DType::BF16, random_values(rng, size_t(kv_len) * Hk * D, 2.f), kb);
    const auto v = encode(DType::BF16, random_values(rng, size_t(kv_len) * Hk * D, 1.f), vb);
    DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), dout(H * D * 2), dlse(H * 4);
    dq.upload(qb);
    dk.upload(kb);
    dv.upload(vb);
    dout.poison();
    dlse.poison();
    SingleDecodeProblem p;
    p.num_qo_heads = H;
    p.num_kv_heads = Hk;
    p.head_dim = D;
    p.kv_len = kv_len;
    p.q_dtype = p.kv_dtype = DType::BF16;
    p.options.return_lse = true;
    SingleDecodePlan plan(rt, p);
    DeviceBuffer ws(std::max<size_t>(plan.workspace_bytes(), 256));
    const int64_t N = kv_len;
    const TensorView tl = make_tensor(dlse.get(), DType::F32, {H});
    plan.run(make_tensor(dq.get(), DType::BF16, {H, D}), make_tensor(dk.get(), DType::BF16, {N, Hk, D}),
             make_tensor(dv.get(), DType::BF16, {N, Hk, D}), make_tensor(dout.get(), DType::BF16, {H, D}), &tl,
             ws.get(), ws.bytes(), nullptr);
    ATTNJIT_CU(cuda::driver().CtxSynchronize());
    const auto out = decode(DType::BF16, dout.download());
    const auto lse = decode(DType::F32, dlse.download());
    Check ck;
    for (int h = 0; h < H; ++h) {
      const RowRef ref = attend(&q[size_t(h) * D], k, v, kv_len, Hk, h / (H / Hk), D, 1.0 / std::sqrt(double(D)),
                                [](int) { return true; });
      ck.row(ref, &out[size_t(h) * D], &lse[h], D);
    }
    INFO("single decode d512 kv_len " << kv_len << " " << plan.describe() << ": o_rel " << ck.o_rel << " lse_abs "
                                      << ck.lse_abs);
    CHECK(ck.o_rel < 1e-2);
    CHECK(ck.lse_abs < 2e-2);
  }
}

TEST_CASE("several query tokens at head_dim 256 and 512, causal", "[gpu][refused]") {
  std::vector<DecodeCase> cases;
  int turn = 0;
  for (int d : {256, 512})
    for (int group : {1, 4, 5, 8}) {
      DecodeCase c;
      c.entry = turn % 3 == 2 ? Entry::Plan : Entry::TrtLlm;
      c.d = d;
      c.hkv = 1 + turn % 2;
      c.hq = c.hkv * group;
      c.q = turn % 2 ? DType::F16 : DType::BF16;
      c.kv = turn % 4 == 3 ? DType::E5M2 : c.q;
      c.kv_lens = turn % 2 ? std::vector<int32_t>{2, 5000, 61, 700} : std::vector<int32_t>{300, 9, 12000};
      const int q = 2 + turn % 4;
      c.q_lens.assign(c.kv_lens.size(), q);
      if (turn % 3 == 1 && c.entry == Entry::TrtLlm) {  // per-request lengths
        c.variable_q = true;
        for (size_t r = 0; r < c.q_lens.size(); ++r) c.q_lens[r] = 1 + int((r * 5 + turn) % 7);
      }
      c.kv_lens[0] = std::max(c.kv_lens[0], 1);  // q_len may exceed kv_len: those tokens see nothing
      c.window_left = turn % 5 == 3 ? 40 : -1;
      c.page_size = turn % 2 ? 16 : 1;
      c.layout = turn % 2 ? KVLayout::NHD : KVLayout::HND;
      cases.push_back(c);
      ++turn;
    }
  expect_all_good(cases, 71);
}

TEST_CASE("TensorRT-LLM's draft-tree mask and single-tensor cache", "[gpu][refused]") {
  std::vector<DecodeCase> cases;
  int turn = 0;
  for (int d : {64, 128, 256})
    for (bool variable : {false, true}) {
      DecodeCase c;
      c.entry = Entry::TrtLlm;
      c.d = d;
      c.hkv = 2;
      c.hq = turn % 2 ? 8 : 10;
      c.kv_lens = {400, 3, 9000, 64};
      c.q_lens = variable ? std::vector<int32_t>{4, 1, 7, 40} : std::vector<int32_t>(4, turn % 2 ? 3 : 33);
      c.variable_q = variable;
      c.draft_mask = true;
      c.tc = turn % 2 == 0;
      c.window_left = turn == 3 ? 20 : -1;
      c.page_size = 16;
      cases.push_back(c);
      ++turn;
    }
  for (int d : {128, 512}) {  // [pages, 1, ...]: K and V the same tensor, causal and one token
    DecodeCase c;
    c.entry = Entry::TrtLlm;
    c.d = d;
    c.kv_lens = {100, 2500, 7};
    c.one_tensor = true;
    cases.push_back(c);
    c.q_lens = {2, 2, 2};
    cases.push_back(c);
  }
  expect_all_good(cases, 101);
}

namespace {

struct PrefillCase {
  std::vector<int32_t> qo_lens, kv_lens;
  int page_size = 0;   // 0: ragged; -1: single prefill (one request)
  bool causal = true;
  int hq = 8, hk = 2, d = 128;
  DType dt = DType::F16;
  std::string label() const {
    return fmt::format("{} qo={} kv={} causal={} {}q/{}kv d={} {}",
                       page_size < 0 ? "single" : page_size ? fmt::format("paged{}", page_size) : "ragged", qo_lens,
                       kv_lens, causal, hq, hk, d, to_string(dt));
  }
};

Check run_prefill(const Runtime& rt, const PrefillCase& c, uint32_t seed) {
  cuda::ScopedDevice scope(0);
  const size_t batch = c.qo_lens.size();
  const int64_t H = c.hq, Hk = c.hk, D = c.d;
  const size_t es = dtype_size(c.dt);
  const RaggedBatch in = make_ragged_batch(seed, c.qo_lens, c.kv_lens, c.hq, c.hk, c.d, c.dt, 1);
  DeviceBuffer dq(in.qb.size()), dout(in.nq * H * D * es), dlse(in.nq * H * 4), ws(128 << 20), dk(in.kb.size()), dv(in.vb.size());
  dq.upload(in.qb);
  dk.upload(in.kb);
  dv.upload(in.vb);
  dout.poison();
  dlse.poison();
  const TensorView tq = make_tensor(dq.get(), c.dt, {in.nq, H, D}), to = make_tensor(dout.get(), c.dt, {in.nq, H, D});
  const TensorView tl = make_tensor(dlse.get(), DType::F32, {in.nq, H});
  BatchPrefillPlanOptions opts;
  opts.causal = c.causal;
  opts.q_data_type = c.dt;
  DeviceBuffer cache;
  if (c.page_size < 0) {
    SinglePrefillProblem p;
    p.num_qo_heads = c.hq;
    p.num_kv_heads = c.hk;
    p.head_dim = c.d;
    p.qo_len = c.qo_lens[0];  // one request
    p.kv_len = c.kv_lens[0];
    p.q_dtype = p.kv_dtype = c.dt;
    p.options.causal = c.causal;
    p.options.return_lse = true;
    SinglePrefillPlan plan(rt, p);
    DeviceBuffer pws(std::max<size_t>(plan.workspace_bytes(), 256));
    plan.run(tq, make_tensor(dk.get(), c.dt, {in.nkv, Hk, D}), make_tensor(dv.get(), c.dt, {in.nkv, Hk, D}), to, &tl, nullptr,
             pws.get(), pws.bytes(), nullptr);
    ATTNJIT_CU(cuda::driver().CtxSynchronize());
  } else if (c.page_size == 0) {
    BatchPrefillWithRaggedKVCacheWrapper w(rt, ws.get(), ws.bytes(), KVLayout::NHD);
    w.plan(in.qo_indptr, in.kv_indptr, c.hq, c.hk, c.d, opts, nullptr);
    const int64_t rows = std::max<int64_t>(in.nkv, 1);
    w.run(tq, make_tensor(dk.get(), c.dt, {rows, Hk, D}), make_tensor(dv.get(), c.dt, {rows, Hk, D}), to, &tl, nullptr);
    ATTNJIT_CU(cuda::driver().CtxSynchronize());
  } else {
    const int S = c.page_size;
    std::vector<int32_t> page_indptr(batch + 1, 0), last(batch), indices;
    for (size_t b = 0; b < batch; ++b) {
      const int32_t pages = (c.kv_lens[b] + S - 1) / S;
      page_indptr[b + 1] = page_indptr[b] + pages;
      last[b] = pages ? c.kv_lens[b] - (pages - 1) * S : 0;
    }
    const int32_t num_pages = page_indptr.back() + 2;
    for (int32_t i = 0; i < page_indptr.back(); ++i) indices.push_back((i * 7 + 1) % num_pages);  // a permutation
    const int64_t page_elems = int64_t(S) * Hk * D;
    std::vector<uint8_t> kc(size_t(num_pages) * page_elems * es, 0), vc(kc.size(), 0);
    for (size_t b = 0; b < batch; ++b)
      for (int32_t j = 0; j < c.kv_lens[b]; ++j) {
        const int64_t at = (int64_t(indices[page_indptr[b] + j / S]) * S + j % S) * Hk * D;
        const int64_t row = in.kv_indptr[b] + j;
        std::copy_n(&in.kb[size_t(row * Hk * D) * es], Hk * D * es, &kc[size_t(at) * es]);
        std::copy_n(&in.vb[size_t(row * Hk * D) * es], Hk * D * es, &vc[size_t(at) * es]);
      }
    cache = DeviceBuffer(2 * kc.size());
    std::vector<uint8_t> both(kc);
    both.insert(both.end(), vc.begin(), vc.end());
    cache.upload(both);
    BatchPrefillWithPagedKVCacheWrapper w(rt, ws.get(), ws.bytes(), KVLayout::NHD);
    w.plan(in.qo_indptr, page_indptr, indices, last, c.hq, c.hk, c.d, S, opts, nullptr);
    const TensorView tkc = make_tensor(cache.get(), c.dt, {num_pages, S, Hk, D});
    const TensorView tvc = make_tensor(static_cast<char*>(cache.get()) + kc.size(), c.dt, {num_pages, S, Hk, D});
    w.run(tq, tkc, tvc, to, &tl, nullptr);
    ATTNJIT_CU(cuda::driver().CtxSynchronize());
  }
  const auto out = decode(c.dt, dout.download());
  const auto lse = decode(DType::F32, dlse.download());
  Check ck;
  for (size_t b = 0; b < batch; ++b) {
    const int64_t M = c.qo_lens[b], N = c.kv_lens[b];
    PrefillOptions po;
    po.causal = c.causal;
    const auto ref = reference_prefill({c.hq, c.hk, c.d, M, N}, po, in.q_of(b), in.k_of(b), in.v_of(b), nullptr);
    for (int64_t i = 0; i < M * H; ++i) {
      RowRef rr;
      rr.o.assign(ref.o.begin() + i * D, ref.o.begin() + (i + 1) * D);
      rr.lse = ref.lse[i];
      const size_t at = size_t(in.qo_indptr[b] * H + i);
      ck.row(rr, &out[at * D], &lse[at], int(D));
    }
  }
  return ck;
}

}  // namespace

TEST_CASE("prefill: causal with qo_len > kv_len and requests with no KV", "[gpu][refused]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  std::vector<PrefillCase> cases;
  for (int d : {64, 128, 256})
    for (DType dt : {DType::F16, DType::BF16}) {
      PrefillCase c;
      c.d = d;
      c.dt = dt;
      c.page_size = -1;  // single
      c.qo_lens = {300};
      c.kv_lens = {77};
      cases.push_back(c);
      c.qo_lens = {1000};
      c.kv_lens = {999};
      cases.push_back(c);
      c.page_size = 0;  // ragged
      c.qo_lens = {129, 5, 64, 1, 700};
      c.kv_lens = {64, 0, 100, 0, 3000};
      cases.push_back(c);
      c.causal = false;
      cases.push_back(c);
      c.causal = true;
      c.page_size = dt == DType::F16 ? 16 : 1;  // paged
      cases.push_back(c);
      c.causal = false;
      cases.push_back(c);
    }
  uint32_t seed = 201;
  for (const auto& c : cases) {
    const Check e = run_prefill(rt, c, seed++);
    INFO(c.label() << ": o_rel " << e.o_rel << " lse_abs " << e.lse_abs << " bad empty rows " << e.bad_empty);
    CHECK(e.bad_empty == 0);
    CHECK(e.o_rel < o_tol(c.dt));
    CHECK(e.lse_abs < lse_tol(c.dt));
  }
}

}  // namespace attnjit::test

// Batch prefill (ragged and paged KV) and the state-merge functions on the
// GPU against the double-precision reference, request by request. Includes
// the spec's paged example and its custom-mask-equals-causal check. Skips
// without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <random>

#include "attnjit/attnjit.hpp"
#include "support/captured_graph.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "support/ragged_batch.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/prefill_reference.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {
namespace {

struct BatchCase {
  std::vector<int32_t> qo_lens, kv_lens;
  int hq = 8, hk = 2, d = 128;
  DType dt = DType::F16;
  KVLayout layout = KVLayout::NHD;
  int page_size = 0;  // 0: ragged
  bool causal = false, custom_causal = false, with_lse = true;
  PosEncoding pos = PosEncoding::None;
  std::optional<float> cap;
  int window_left = -1;
  std::string backend = "auto";

  std::string label() const {
    return fmt::format("{} batch={} H={}/{} D={} {} {} {} {}{}{}{}", backend, qo_lens.size(), hq, hk, d, to_string(dt), to_string(layout),
                       page_size ? fmt::format("paged{}", page_size) : "ragged",
                       custom_causal ? "custom(causal)" : causal ? "causal" : "nomask", cap ? " cap" : "",
                       pos == PosEncoding::None ? "" : std::string(" ") + to_string(pos),
                       window_left >= 0 ? fmt::format(" window={}", window_left) : "");
  }
};

struct BatchOutcome {
  double o_rel = 0, lse_abs = 0;
  std::vector<float> out;
};

std::vector<uint8_t> raw_rows(const std::vector<uint8_t>& b, size_t es, int64_t row, int64_t width) {
  return std::vector<uint8_t>(b.begin() + row * width * es, b.begin() + (row + 1) * width * es);
}

// The case's mask and score options in the batch plan's or the reference's options.
template <class Options>
Options mask_and_score_options(const BatchCase& c) {
  Options o;
  o.causal = c.causal;
  o.pos_encoding_mode = c.pos;
  o.logits_soft_cap = c.cap;
  o.window_left = c.window_left;
  return o;
}

BatchOutcome run_batch(const Runtime& rt, const BatchCase& c, uint32_t seed) {
  cuda::ScopedDevice scope(0);
  const size_t batch = c.qo_lens.size();
  const int64_t H = c.hq, Hk = c.hk, D = c.d;
  const size_t es = dtype_size(c.dt);
  RaggedBatch in = make_ragged_batch(seed, c.qo_lens, c.kv_lens, c.hq, c.hk, c.d, c.dt);  // K, V logical [nkv, Hk, D]

  auto opts = mask_and_score_options<BatchPrefillPlanOptions>(c);
  opts.q_data_type = c.dt;
  if (c.custom_causal)
    for (size_t b = 0; b < batch; ++b)
      for (int32_t i = 0; i < c.qo_lens[b]; ++i)
        for (int32_t j = 0; j < c.kv_lens[b]; ++j) opts.custom_mask.push_back(j <= c.kv_lens[b] - c.qo_lens[b] + i);

  DeviceBuffer dq(in.qb.size()), dout(in.nq * H * D * es), dlse(in.nq * H * 4), ws(64 << 20);
  dq.upload(in.qb);
  dout.poison();
  dlse.poison();
  const TensorView tq = make_tensor(dq.get(), c.dt, {in.nq, H, D});
  const TensorView to = make_tensor(dout.get(), c.dt, {in.nq, H, D});
  const TensorView tl = make_tensor(dlse.get(), DType::F32, {in.nq, H});
  const bool nhd = c.layout == KVLayout::NHD;
  DeviceBuffer dk, dv;
  if (c.page_size == 0) {
    auto to_layout = [&](const std::vector<uint8_t>& b) {
      if (nhd) return b;
      std::vector<uint8_t> out(b.size());
      for (int64_t n = 0; n < in.nkv; ++n)
        for (int64_t h = 0; h < Hk; ++h)
          std::copy_n(&b[size_t((n * Hk + h) * D) * es], D * es, &out[size_t((h * in.nkv + n) * D) * es]);
      return out;
    };
    dk = DeviceBuffer(in.kb.size());
    dv = DeviceBuffer(in.vb.size());
    dk.upload(to_layout(in.kb));
    dv.upload(to_layout(in.vb));
    BatchPrefillWithRaggedKVCacheWrapper w(rt, ws.get(), ws.bytes(), c.layout, c.backend);
    w.plan(in.qo_indptr, in.kv_indptr, c.hq, c.hk, c.d, opts, nullptr);
    // A vector, not an initializer_list: one kept in a variable outlives its array.
  const std::vector<int64_t> kv_shape = nhd ? std::vector<int64_t>{in.nkv, Hk, D} : std::vector<int64_t>{Hk, in.nkv, D};
    w.run(tq, make_tensor(dk.get(), c.dt, kv_shape), make_tensor(dv.get(), c.dt, kv_shape), to, c.with_lse ? &tl : nullptr,
          nullptr);
  } else {
    // Pages in a shuffled order, one 5-D cache [pages, 2, ...] viewed as (k, v).
    const int S = c.page_size;
    std::vector<int32_t> page_indptr(batch + 1, 0), last(batch);
    for (size_t b = 0; b < batch; ++b) {
      const int32_t pages = (c.kv_lens[b] + S - 1) / S;
      page_indptr[b + 1] = page_indptr[b] + pages;
      last[b] = pages ? c.kv_lens[b] - (pages - 1) * S : 0;
    }
    const int32_t num_pages = page_indptr.back() + 3;  // a few pages nobody uses
    std::vector<int32_t> ids(num_pages);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), in.rng);
    std::vector<int32_t> indices(ids.begin(), ids.begin() + page_indptr.back());
    const int64_t page_elems = int64_t(S) * Hk * D;
    // Every slot no request holds (the last pages' tails, the unused pages)
    // is NaN, as a cache never written may be: no kernel may let them reach
    // the output (0 * NaN is NaN).
    std::vector<uint8_t> cache(size_t(num_pages) * 2 * page_elems * es, 0xFF);
    for (size_t b = 0; b < batch; ++b)
      for (int32_t j = 0; j < c.kv_lens[b]; ++j) {
        const int32_t page = indices[page_indptr[b] + j / S], slot = j % S;
        const int64_t row = in.kv_indptr[b] + j;
        for (int64_t h = 0; h < Hk; ++h) {
          const int64_t within = nhd ? (int64_t(slot) * Hk + h) * D : (h * S + slot) * D;
          std::copy_n(&in.kb[size_t((row * Hk + h) * D) * es], D * es, &cache[size_t((int64_t(page) * 2 * page_elems) + within) * es]);
          std::copy_n(&in.vb[size_t((row * Hk + h) * D) * es], D * es,
                      &cache[size_t((int64_t(page) * 2 * page_elems) + page_elems + within) * es]);
        }
      }
    dk = DeviceBuffer(cache.size());
    dk.upload(cache);
    BatchPrefillWithPagedKVCacheWrapper w(rt, ws.get(), ws.bytes(), c.layout, c.backend);
    w.plan(in.qo_indptr, page_indptr, indices, last, c.hq, c.hk, c.d, S, opts, nullptr);
    TensorView kc = make_tensor(dk.get(), c.dt,
                                nhd ? std::initializer_list<int64_t>{num_pages, S, Hk, D}
                                    : std::initializer_list<int64_t>{num_pages, Hk, S, D});
    kc.strides[0] = 2 * page_elems;  // cache[:, 0]
    TensorView vc = kc;
    vc.data = static_cast<char*>(dk.get()) + page_elems * es;  // cache[:, 1]
    w.run(tq, kc, vc, to, c.with_lse ? &tl : nullptr, nullptr);
  }
  ATTNJIT_CU(cuda::driver().CtxSynchronize());

  BatchOutcome r;
  const auto out = decode(c.dt, dout.download());
  const auto lse = decode(DType::F32, dlse.download());
  r.out.assign(out.begin(), out.end());
  double num = 0, den = 0;
  for (size_t b = 0; b < batch; ++b) {
    const int64_t M = c.qo_lens[b], N = c.kv_lens[b];
    const auto ref = reference_prefill({c.hq, c.hk, c.d, M, N}, mask_and_score_options<PrefillOptions>(c), in.q_of(b), in.k_of(b), in.v_of(b), nullptr);
    for (size_t i = 0; i < ref.o.size(); ++i) {
      const double got = out[size_t(in.qo_indptr[b] * H * D) + i];
      if (!std::isfinite(got)) {
        r.o_rel = r.lse_abs = INFINITY;
        return r;
      }
      num += (got - ref.o[i]) * (got - ref.o[i]);
      den += ref.o[i] * ref.o[i];
    }
    if (c.with_lse)
      for (size_t i = 0; i < ref.lse.size(); ++i) {
        const double got = lse[size_t(in.qo_indptr[b] * H) + i];
        if (std::isinf(ref.lse[i])) continue;
        r.lse_abs = std::max(r.lse_abs, std::fabs(got - ref.lse[i]));
      }
  }
  r.o_rel = std::sqrt(num / std::max(den, 1e-30));
  return r;
}

double tol(DType d) { return d == DType::BF16 ? 1e-2 : 2e-3; }
double lse_tol(const BatchCase& c) {
  const bool rope = c.pos == PosEncoding::RopeLlama;
  return c.dt == DType::BF16 ? (rope ? 5e-2 : 2e-2) : (rope ? 1e-2 : 4e-3);
}

// A skewed batch (lengths 1 to 4096) at each page size (0: ragged), causal or
// not, both layouts; then an append of 32 x 16 tokens on 2k cached (split KV).
std::vector<BatchCase> skewed_batches(std::initializer_list<int> page_sizes) {
  std::vector<BatchCase> cases;
  BatchCase c;
  c.qo_lens = {1, 7, 128, 300, 1};
  c.kv_lens = {4096, 7, 1000, 300, 17};
  for (int page : page_sizes)
    for (bool causal : {false, true})
      for (KVLayout layout : {KVLayout::NHD, KVLayout::HND}) {
        c.page_size = page;
        c.causal = causal;
        c.layout = layout;
        c.dt = causal ? DType::BF16 : DType::F16;
        cases.push_back(c);
      }
  BatchCase append;
  append.qo_lens.assign(32, 16);
  append.kv_lens.assign(32, 2048);
  append.page_size = 16;
  append.causal = true;
  append.hq = 32;
  append.hk = 8;
  cases.push_back(append);
  return cases;
}

// Causal GQA (6 / 2 heads) at head_dim 64 and 256, at each page size.
void add_narrow_and_wide_heads(std::vector<BatchCase>& cases, const std::vector<int32_t>& qo_lens,
                               const std::vector<int32_t>& kv_lens, std::initializer_list<int> page_sizes) {
  BatchCase c;
  c.qo_lens = qo_lens;
  c.kv_lens = kv_lens;
  c.hq = 6;
  c.hk = 2;
  c.causal = true;
  for (int d : {64, 256})
    for (int page : page_sizes) {
      c.d = d;
      c.page_size = page;
      cases.push_back(c);
    }
}

// `c` with ALiBi, a soft cap of 20 and a window of 40.
BatchCase with_alibi_cap_window(BatchCase c) {
  c.pos = PosEncoding::Alibi;
  c.cap = 20.f;
  c.window_left = 40;
  return c;
}

struct Worst {
  double o_rel = 0, lse_abs = 0;
};

// Runs each case (seeds `seed`, `seed` + 1, ...; on `backend` where one is
// named) and checks o and lse against the reference; warn_each: a WARN per
// case with its errors. Returns the worst errors.
Worst expect_all_close(const Runtime& rt, const std::vector<BatchCase>& cases, uint32_t seed,
                       const std::string& backend = "", bool warn_each = true) {
  Worst worst;
  for (BatchCase c : cases) {
    if (!backend.empty()) c.backend = backend;
    INFO(c.label());
    const auto e = run_batch(rt, c, seed++);
    CHECK(e.o_rel <= tol(c.dt));
    CHECK(e.lse_abs <= lse_tol(c));
    worst.o_rel = std::max(worst.o_rel, e.o_rel);
    worst.lse_abs = std::max(worst.lse_abs, e.lse_abs);
    if (warn_each) WARN(c.label() << ": rel L2 err(o) " << e.o_rel << ", abs err(lse) " << e.lse_abs);
  }
  return worst;
}

}  // namespace

TEST_CASE("batch prefill, ragged and paged, matches the float64 reference", "[gpu][prefill][batch]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  std::vector<BatchCase> cases = skewed_batches({0, 1, 16});
  add_narrow_and_wide_heads(cases, {50, 3}, {90, 700}, {16});
  BatchCase rope;
  rope.qo_lens = {64, 9};
  rope.kv_lens = {64, 500};
  rope.causal = true;
  rope.pos = PosEncoding::RopeLlama;
  rope.page_size = 1;
  cases.push_back(rope);
  BatchCase alibi = with_alibi_cap_window(rope);
  alibi.page_size = 0;
  cases.push_back(alibi);
  // Both skeletons: the planner's own choice (Hopper's on sm_90a) and mma.sync by name.
  const size_t planned = cases.size();
  for (size_t i = 0; i < planned; ++i) {
    cases.push_back(cases[i]);
    cases.back().backend = "fa2";
  }
  expect_all_close(rt, cases, 100);
}

// The warp-specialized Hopper skeleton (backend "fa3_ws"): ragged (TMA) and
// paged (the producer's gather) at page sizes 1, 16, 5 (pages that split a
// KV tile unevenly), 8, 32 and 128 (a page longer than a 64-key tile), both
// layouts, masks, GQA, 64/256-wide heads, ALiBi with a soft cap and a window,
// and an append with a split KV; every slot no request holds is NaN.
//   attnjit_tests "[fa3_ws]"
TEST_CASE("batch prefill on the warp-specialized skeleton matches the float64 reference", "[gpu][prefill][batch][fa3_ws]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  if (!on_sm90a(rt, "fa3_ws")) return;
  std::vector<BatchCase> cases = skewed_batches({0, 1, 16, 5, 8, 32});
  add_narrow_and_wide_heads(cases, {50, 3, 200}, {90, 700, 1500}, {0, 16, 128});
  BatchCase alibi;
  alibi.qo_lens = {64, 9};
  alibi.kv_lens = {64, 500};
  alibi.causal = true;
  alibi = with_alibi_cap_window(alibi);
  cases.push_back(alibi);
  alibi.page_size = 16;
  cases.push_back(alibi);
  BatchCase custom;
  custom.qo_lens = {130, 20};
  custom.kv_lens = {400, 260};
  custom.causal = true;  // the reference's mask: the custom one equals it
  custom.custom_causal = true;
  custom.page_size = 16;
  cases.push_back(custom);
  // A plain causal window (128-key tiles: each row's kept keys one run,
  // mask.cuh's KeyRun), crossed by tiles and by pages of 5, ragged and paged.
  BatchCase window;
  window.qo_lens = {300, 77, 1};
  window.kv_lens = {700, 1000, 333};
  window.causal = true;
  window.window_left = 150;
  for (int page : {0, 16, 5}) {
    window.page_size = page;
    cases.push_back(window);
  }
  // RoPE: K gathered and rotated by the producer from ragged rows and from
  // pages (16, and 5 where a thread's rows cross pages), 64-wide heads.
  BatchCase rope;
  rope.qo_lens = {64, 9, 130};
  rope.kv_lens = {64, 500, 1300};
  rope.causal = true;
  rope.pos = PosEncoding::RopeLlama;
  for (int page : {0, 16, 5}) {
    rope.page_size = page;
    cases.push_back(rope);
  }
  for (int page : {0, 16}) {
    rope.d = 64;
    rope.page_size = page;
    rope.dt = DType::F16;
    cases.push_back(rope);
  }
  const Worst worst = expect_all_close(rt, cases, 300, "fa3_ws");
  WARN("batch prefill fa3_ws: " << cases.size() << " cases, worst rel L2 err(o) " << worst.o_rel
                                << ", worst abs err(lse) " << worst.lse_abs);
}

// A few small fa3_ws problems for compute-sanitizer (memcheck, racecheck,
// synccheck: SANITIZE=[fa3_ws_small] tools/gpu/sanitize.sh): TMA (ragged),
// gather (pages of 16, 5, and 8 in HND), KV tiles and items, causal and not.
TEST_CASE("batch prefill fa3_ws, small cases for the sanitizers", "[gpu][fa3_ws_small]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  if (!on_sm90a(rt, "fa3_ws")) return;
  std::vector<BatchCase> cases;
  for (int page : {0, 16, 5}) {
    BatchCase c;
    c.qo_lens = {7, 130};
    c.kv_lens = {7, 300};
    c.page_size = page;
    c.causal = page != 5;
    c.layout = page == 5 ? KVLayout::HND : KVLayout::NHD;
    c.backend = "fa3_ws";
    cases.push_back(c);
  }
  cases.back().d = 64;
  cases.push_back(cases[1]);  // pages of 8 rows in the HND layout
  cases.back().page_size = 8;
  cases.back().layout = KVLayout::HND;
  cases.push_back(cases.front());  // a causal window that starts inside the second request's tiles
  cases.back().window_left = 45;
  for (int page : {0, 16}) {  // RoPE: the producer rewrites each K tile before announcing it
    BatchCase c;
    c.qo_lens = {7, 130};
    c.kv_lens = {7, 300};
    c.page_size = page;
    c.causal = true;
    c.pos = PosEncoding::RopeLlama;
    c.backend = "fa3_ws";
    cases.push_back(c);
  }
  expect_all_close(rt, cases, 900, "", false);
}

TEST_CASE("batch prefill: the spec's paged example; a custom mask equal to causal gives the causal output",
          "[gpu][prefill][batch]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  // qo_indptr [0, 33, 44, 55, 66, 77, 88, 100]; paged_kv_indptr [0, 17, 29, 44, 48, 66, 100, 128];
  // last_page_len [1, 7, 14, 4, 3, 1, 16]; page_size 16; 64 / 16 heads, head_dim 128.
  const std::vector<int32_t> qo_indptr = {0, 33, 44, 55, 66, 77, 88, 100};
  const std::vector<int32_t> pages = {0, 17, 29, 44, 48, 66, 100, 128}, last = {1, 7, 14, 4, 3, 1, 16};
  BatchCase c;
  c.hq = 64;
  c.hk = 16;
  c.page_size = 16;
  c.causal = true;
  for (size_t b = 0; b < 7; ++b) {
    c.qo_lens.push_back(qo_indptr[b + 1] - qo_indptr[b]);
    c.kv_lens.push_back(16 * (pages[b + 1] - pages[b] - 1) + last[b]);
  }
  const auto causal = run_batch(rt, c, 5);
  CHECK(causal.o_rel <= tol(c.dt));
  c.custom_causal = true;
  const auto custom = run_batch(rt, c, 5);
  REQUIRE(custom.out.size() == causal.out.size());
  CHECK(max_abs_difference(custom.out, causal.out) <= 1e-3);
}

TEST_CASE("merge_state, merge_state_in_place and merge_states follow the definition", "[gpu][merge]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const int64_t seq = 37, H = 4, D = 128, NS = 3;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<float> vf(seq * NS * H * D), sf(seq * NS * H);
  for (auto& x : vf) x = uni(rng);
  for (auto& x : sf) x = 4.f * uni(rng);
  std::vector<uint8_t> vb;
  const auto v = encode(DType::BF16, vf, vb);
  // Reference of merging states `which` of [seq, NS, H, D].
  auto ref = [&](std::vector<int> which, std::vector<double>& o, std::vector<double>& s) {
    o.assign(seq * H * D, 0);
    s.assign(seq * H, 0);
    for (int64_t i = 0; i < seq; ++i)
      for (int64_t h = 0; h < H; ++h) {
        double m = -INFINITY;
        for (int k : which) m = std::max(m, double(sf[(i * NS + k) * H + h]));
        double den = 0;
        for (int k : which) den += std::exp2(sf[(i * NS + k) * H + h] - m);
        for (int k : which) {
          const double w = std::exp2(sf[(i * NS + k) * H + h] - m) / den;
          for (int64_t d = 0; d < D; ++d) o[(i * H + h) * D + d] += w * v[((i * NS + k) * H + h) * D + d];
        }
        s[i * H + h] = m + std::log2(den);
      }
  };
  DeviceBuffer dv(vb.size()), ds(sf.size() * 4), dout(seq * H * D * 2), dso(seq * H * 4);
  dv.upload(vb);
  std::vector<uint8_t> sb(sf.size() * 4);
  std::memcpy(sb.data(), sf.data(), sb.size());
  ds.upload(sb);
  auto check = [&](const std::vector<double>& o_ref, const std::vector<double>& s_ref, const std::vector<float>& o,
                   const std::vector<float>& s) {
    double num = 0, den = 0, lse = 0;
    for (size_t i = 0; i < o.size(); ++i) {
      num += (o[i] - o_ref[i]) * (o[i] - o_ref[i]);
      den += o_ref[i] * o_ref[i];
    }
    for (size_t i = 0; i < s.size(); ++i) lse = std::max(lse, std::fabs(s[i] - s_ref[i]));
    CHECK(std::sqrt(num / den) <= 1e-2);
    CHECK(lse <= 1e-4);
  };
  std::vector<double> o_ref, s_ref;
  // merge_states over all three.
  TensorView tv = make_tensor(dv.get(), DType::BF16, {seq, NS, H, D});
  TensorView ts = make_tensor(ds.get(), DType::F32, {seq, NS, H});
  TensorView to = make_tensor(dout.get(), DType::BF16, {seq, H, D});
  TensorView tso = make_tensor(dso.get(), DType::F32, {seq, H});
  merge_states(rt, tv, ts, to, &tso, nullptr);
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  ref({0, 1, 2}, o_ref, s_ref);
  {
    const auto o = decode(DType::BF16, dout.download());
    const auto s = decode(DType::F32, dso.download());
    check(o_ref, s_ref, std::vector<float>(o.begin(), o.end()), std::vector<float>(s.begin(), s.end()));
  }
  // merge_state of states 0 and 2, as strided [seq, H, D] views.
  auto state_view = [&](int k) {
    TensorView t = make_tensor(static_cast<char*>(dv.get()) + k * H * D * 2, DType::BF16, {seq, H, D});
    t.strides[0] = NS * H * D;
    return t;
  };
  auto lse_view = [&](int k) {
    TensorView t = make_tensor(static_cast<char*>(ds.get()) + k * H * 4, DType::F32, {seq, H});
    t.strides[0] = NS * H;
    return t;
  };
  merge_state(rt, state_view(0), lse_view(0), state_view(2), lse_view(2), to, &tso, nullptr);
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  ref({0, 2}, o_ref, s_ref);
  {
    const auto o = decode(DType::BF16, dout.download());
    const auto s = decode(DType::F32, dso.download());
    check(o_ref, s_ref, std::vector<float>(o.begin(), o.end()), std::vector<float>(s.begin(), s.end()));
  }
}

TEST_CASE("merge_state_in_place merges where the mask says and leaves the other positions", "[gpu][merge]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const int64_t seq = 20, H = 2, D = 64;
  std::mt19937 rng(9);
  std::vector<uint8_t> ab, bb;
  const auto va = encode(DType::F16, random_values(rng, seq * H * D, 1.f), ab);
  const auto vb = encode(DType::F16, random_values(rng, seq * H * D, 1.f), bb);
  const auto sa = random_values(rng, seq * H, 3.f), sb = random_values(rng, seq * H, 3.f);
  std::vector<uint8_t> mask(seq);
  for (int64_t i = 0; i < seq; ++i) mask[i] = i % 3 != 0;
  auto bytes = [](const std::vector<float>& f) {
    std::vector<uint8_t> b(f.size() * 4);
    std::memcpy(b.data(), f.data(), b.size());
    return b;
  };
  DeviceBuffer dva(ab.size()), dvb(bb.size()), dsa(sa.size() * 4), dsb(sb.size() * 4), dm(seq);
  dva.upload(ab);
  dvb.upload(bb);
  dsa.upload(bytes(sa));
  dsb.upload(bytes(sb));
  dm.upload(mask);
  merge_state_in_place(rt, make_tensor(dva.get(), DType::F16, {seq, H, D}), make_tensor(dsa.get(), DType::F32, {seq, H}),
                       make_tensor(dvb.get(), DType::F16, {seq, H, D}), make_tensor(dsb.get(), DType::F32, {seq, H}),
                       static_cast<const uint8_t*>(dm.get()), nullptr);
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  const auto v = decode(DType::F16, dva.download());
  const auto s = decode(DType::F32, dsa.download());
  double worst_v = 0, worst_s = 0;
  for (int64_t i = 0; i < seq; ++i)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t r = i * H + h;
      const double m = std::max(sa[r], sb[r]), wa = std::exp2(sa[r] - m), wb = std::exp2(sb[r] - m);
      const double s_ref = mask[i] ? m + std::log2(wa + wb) : sa[r];
      worst_s = std::max(worst_s, std::fabs(s[r] - s_ref));
      for (int64_t d = 0; d < D; ++d) {
        const double v_ref = mask[i] ? (wa * va[r * D + d] + wb * vb[r * D + d]) / (wa + wb) : va[r * D + d];
        worst_v = std::max(worst_v, std::fabs(v[r * D + d] - v_ref));
      }
    }
  CHECK(worst_v <= 2e-3);
  CHECK(worst_s <= 1e-4);
}

TEST_CASE("batch prefill run() is captured in a CUDA graph and replays to the same output", "[gpu][prefill][batch][graph]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  const std::vector<int32_t> qo_indptr = {0, 5, 9}, kv_indptr = {0, 3000, 9000};  // short queries: split + merge
  const int64_t H = 8, Hk = 2, D = 128, nq = 9, nk = 9000;
  std::mt19937 rng(4);
  std::vector<uint8_t> qb, kb, vb;
  encode(DType::BF16, random_values(rng, nq * H * D, 1.f), qb);
  encode(DType::BF16, random_values(rng, nk * Hk * D, 1.f), kb);
  encode(DType::BF16, random_values(rng, nk * Hk * D, 1.f), vb);
  DeviceBuffer dq(qb.size()), dk(kb.size()), dv(vb.size()), o1(nq * H * D * 2), o2(nq * H * D * 2), ws(32 << 20);
  dq.upload(qb);
  dk.upload(kb);
  dv.upload(vb);
  o2.poison();
  BatchPrefillWithRaggedKVCacheWrapper w(rt, ws.get(), ws.bytes());
  BatchPrefillPlanOptions opts;
  opts.causal = true;
  opts.q_data_type = DType::BF16;
  CUstream stream;
  ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  w.plan(qo_indptr, kv_indptr, 8, 2, 128, opts, stream);
  const auto tq = make_tensor(dq.get(), DType::BF16, {nq, H, D});
  const auto tk = make_tensor(dk.get(), DType::BF16, {nk, Hk, D});
  const auto tv = make_tensor(dv.get(), DType::BF16, {nk, Hk, D});
  w.run(tq, tk, tv, make_tensor(o1.get(), DType::BF16, {nq, H, D}), nullptr, stream);
  const CapturedGraph graph(stream, [&] {
    w.run(tq, tk, tv, make_tensor(o2.get(), DType::BF16, {nq, H, D}), nullptr, stream);
  });
  for (int i = 0; i < 3; ++i) graph.launch(stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  CHECK(o1.download() == o2.download());
  cu.StreamDestroy(stream);
}

// head_dim 512 through the ragged and paged wrappers (fa2, two CTAs per work
// item): odd groups (7:1, 3:1), lengths of 1 and off the tiles, causal with
// qo_len > kv_len, a page size that divides no length, RoPE, ALiBi with a
// soft cap and a window, and a one-token append to a long KV (split, merged).
//   attnjit_tests "[prefill][d512]"
TEST_CASE("batch prefill at head_dim 512, ragged and paged, matches the float64 reference",
          "[gpu][prefill][batch][d512]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  std::vector<BatchCase> cases;
  for (int page : {0, 5}) {
    BatchCase c;
    c.qo_lens = {1, 70, 130};
    c.kv_lens = {1, 333, 95};  // the last: rows that see no key
    c.d = 512;
    c.hq = 7;
    c.hk = 1;
    c.causal = true;
    c.page_size = page;
    c.layout = page ? KVLayout::HND : KVLayout::NHD;
    c.dt = page ? DType::BF16 : DType::F16;
    cases.push_back(c);
  }
  BatchCase rope;
  rope.qo_lens = {33, 9};
  rope.kv_lens = {64, 517};
  rope.d = 512;
  rope.hq = 6;
  rope.hk = 2;
  rope.causal = true;
  rope.pos = PosEncoding::RopeLlama;
  rope.page_size = 16;
  rope.dt = DType::BF16;
  cases.push_back(rope);
  BatchCase alibi = with_alibi_cap_window(rope);
  alibi.page_size = 0;
  alibi.dt = DType::F16;
  cases.push_back(alibi);
  BatchCase append;  // one new token on 30k cached: the KV is split and merged
  append.qo_lens = {1};
  append.kv_lens = {30000};
  append.d = 512;
  append.hq = 3;
  append.hk = 1;
  append.causal = true;
  append.page_size = 16;
  cases.push_back(append);
  for (const char* backend : {"auto", "fa2"}) expect_all_close(rt, cases, 512, backend, false);
}

}  // namespace attnjit::test

// fp8 (e4m3) prefill on the warp-specialized Hopper kernel against the
// double-precision reference of the dequantized inputs (q8 * scale_q[h],
// k8 * scale_k[kv head], v8 * scale_v[kv head]): single prefill and the
// ragged batch wrapper, bf16 and f16 outputs, lengths that are not tile
// multiples, GQA groups 1, 4 and 7, causal and none, a custom mask, a
// window, and backend 'auto' (the planner's own choice). Skips without a
// GPU or off sm_90a.
//   attnjit_tests "[fp8]"   (or "[gpu][fa3_ws][fp8]")
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "attnjit/attnjit.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/prefill_reference.hpp"
#include "reference/sample_values.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"

namespace attnjit::test {
namespace {

// The kernel rounds P (in [0, 1]) to e4m3 before P V: relative L2 of o,
// worst error relative to max |ref|, lse (base 2) absolute.
constexpr double kRelL2 = 4e-2, kWorstRel = 1e-1, kLseAbs = 2e-2;
// Hopper's fp8 MMA keeps fewer accumulator bits than fp32 (about 14 mantissa
// bits: DeepSeek-V3's report measures it), so every score S = q . k carries
// an error of about 2^-14 of the sum of |q_d k_d| per 32-dim step, four steps
// for 128 dims. The lse (a logit, base 2) may be off by that much more:
// 2^-11 of a row's logit magnitude bound log2(e) sm_scale ||q||_1 max|k|. The
// test's logits reach +-70 (sharper than a model's), where that is 0.02-0.04;
// the observed errors there were 0.021-0.026 (H100, 2026-12-07).
constexpr double kAccumulatorShare = 1.0 / 2048;

struct Fp8Case {
  int64_t qo = 1, kv = 1;
  int hq = 4, hk = 4;
  DType o = DType::BF16;
  bool causal = false, custom = false;
  int window_left = -1;
  std::string backend = "fa3_ws";
  std::string label() const {
    return fmt::format("qo={} kv={} H={}/{} o={} {}{} win={} backend={}", qo, kv, hq, hk, to_string(o),
                       custom ? "custom" : causal ? "causal" : "nomask", "", window_left, backend);
  }
};

struct Errors {
  double rel_l2 = 0, worst_rel = 0;
  double lse_abs = 0;     // max |lse - ref| less the row's accumulator allowance (kLseAbs bounds it)
  double lse_raw = 0;     // max |lse - ref|, for the message
};

// Host e4m3 data and its dequantized values ([rows, heads, D], one scale a head).
struct Quantized {
  std::vector<uint8_t> bytes;
  std::vector<double> raw;      // the e4m3 values
  std::vector<double> dequant;  // raw * scale[head]
};
Quantized quantize(std::mt19937& rng, int64_t rows, int heads, int D, float amplitude,
                   const std::vector<float>& scale) {
  Quantized r;
  r.raw = encode(DType::E4M3, random_values(rng, size_t(rows * heads * D), amplitude), r.bytes);
  r.dequant = r.raw;
  for (int64_t i = 0; i < rows; ++i)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < D; ++d) r.dequant[size_t((i * heads + h) * D + d)] *= scale[size_t(h)];
  return r;
}
std::vector<float> head_scales(std::mt19937& rng, int heads) {
  std::uniform_real_distribution<float> u(0.5f, 2.f);
  std::vector<float> s(static_cast<size_t>(heads));
  for (auto& x : s) x = u(rng);
  return s;
}

void accumulate(Errors& e, double& num, double& den, double& worst, double& peak, const std::vector<double>& out,
                const std::vector<double>& ref, size_t offset, const std::string& label) {
  for (size_t i = 0; i < ref.size(); ++i) {
    const double o = out[offset + i];
    if (!std::isfinite(o)) {
      FAIL_CHECK(label << ": o[" << offset + i << "] = " << o << " (not written or not finite)");
      e.rel_l2 = INFINITY;
      return;
    }
    num += (o - ref[i]) * (o - ref[i]);
    den += ref[i] * ref[i];
    worst = std::max(worst, std::fabs(o - ref[i]));
    peak = std::max(peak, std::fabs(ref[i]));
  }
}

// Per query row and head (row-major [rows, hq]): log2(e) * logit_scale * ||q||_1 * max|k| of its KV
// head, the largest |logit| (base 2) the row can have: the accumulator's error scales with it.
std::vector<double> logit_bounds(const std::vector<double>& q, const std::vector<double>& k, int64_t rows,
                                 int64_t keys, int hq, int hk, int D, double logit_scale) {
  std::vector<double> kmax(size_t(hk), 0.0), out(size_t(rows * hq));
  for (int64_t j = 0; j < keys; ++j)
    for (int h = 0; h < hk; ++h)
      for (int d = 0; d < D; ++d) kmax[size_t(h)] = std::max(kmax[size_t(h)], std::fabs(k[size_t((j * hk + h) * D + d)]));
  for (int64_t i = 0; i < rows; ++i)
    for (int h = 0; h < hq; ++h) {
      double l1 = 0;
      for (int d = 0; d < D; ++d) l1 += std::fabs(q[size_t((i * hq + h) * D + d)]);
      out[size_t(i * hq + h)] = M_LOG2E * logit_scale * l1 * kmax[size_t(h / (hq / hk))];
    }
  return out;
}

void lse_error(Errors& e, const std::vector<double>& lse, const std::vector<double>& ref, const std::vector<double>& bound,
               size_t offset) {
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i])) {
      if (!(std::isinf(lse[offset + i]) && lse[offset + i] < 0)) e.lse_abs = e.lse_raw = INFINITY;
      continue;
    }
    const double err = std::fabs(lse[offset + i] - ref[i]);
    e.lse_raw = std::max(e.lse_raw, err);
    e.lse_abs = std::max(e.lse_abs, err - kAccumulatorShare * bound[i]);
  }
}

PrefillOptions options_of(const Fp8Case& c) {
  PrefillOptions o;
  o.causal = c.causal;
  o.custom_mask = c.custom;
  o.window_left = c.window_left;
  o.backend = c.backend;
  o.return_lse = true;
  o.o_dtype = c.o;
  return o;
}

// One single prefill; `ignore` drops a scale from the reference (0: none, 1: scale_q, 2: scale_v), to show it matters.
Errors run_single(const Runtime& rt, const Fp8Case& c, uint32_t seed, int ignore = 0) {
  const int D = 128;
  const int64_t M = c.qo, N = c.kv;
  std::mt19937 rng(seed);
  const auto sq = head_scales(rng, c.hq), sk = head_scales(rng, c.hk), sv = head_scales(rng, c.hk);
  const Quantized q = quantize(rng, M, c.hq, D, 3.f, sq), k = quantize(rng, N, c.hk, D, 3.f, sk),
                  v = quantize(rng, N, c.hk, D, 2.f, sv);
  std::vector<bool> mask;
  std::vector<uint8_t> packed;
  if (c.custom) {
    std::bernoulli_distribution coin(0.7);
    mask.resize(size_t(M * N));
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = coin(rng);
    packed = pack_custom_mask(mask);
  }
  DeviceBuffer dq(q.bytes.size()), dk(k.bytes.size()), dv(v.bytes.size()), dout(size_t(M * c.hq * D * 2)),
      dlse(size_t(M * c.hq * 4)), dsq(sq.size() * 4), dsk(sk.size() * 4), dsv(sv.size() * 4),
      dmask(std::max<size_t>(packed.size(), 1));
  dq.upload(q.bytes);
  dk.upload(k.bytes);
  dv.upload(v.bytes);
  dsq.upload(sq);
  dsk.upload(sk);
  dsv.upload(sv);
  if (!packed.empty()) dmask.upload(packed);
  dout.poison();
  dlse.poison();
  const TensorView tq = make_tensor(dq.get(), DType::E4M3, {M, c.hq, D});
  const TensorView tk = make_tensor(dk.get(), DType::E4M3, {N, c.hk, D});
  const TensorView tv = make_tensor(dv.get(), DType::E4M3, {N, c.hk, D});
  const TensorView to = make_tensor(dout.get(), c.o, {M, c.hq, D});
  const TensorView tl = make_tensor(dlse.get(), DType::F32, {M, c.hq});
  const TensorView tsq = make_tensor(dsq.get(), DType::F32, {c.hq});
  const TensorView tsk = make_tensor(dsk.get(), DType::F32, {c.hk});
  const TensorView tsv = make_tensor(dsv.get(), DType::F32, {c.hk});
  const PrefillScales scales{&tsq, &tsk, &tsv};
  const PackedMask pm{dmask.get(), packed.size()};
  PrefillOptions opts = options_of(c);
  opts.custom_mask = false;  // the one-call form sets it from the mask
  single_prefill_with_kv_cache(rt, tq, tk, tv, to, &tl, opts, nullptr, c.custom ? &pm : nullptr, nullptr, 0,
                               &scales);
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  const auto out = decode(c.o, dout.download());
  const auto lse = decode(DType::F32, dlse.download());
  const std::vector<double> qr = ignore == 1 ? q.raw : q.dequant;
  const std::vector<double> vr = ignore == 2 ? v.raw : v.dequant;
  const auto ref = reference_prefill({c.hq, c.hk, D, M, N}, options_of(c), qr, k.dequant, vr,
                                     c.custom ? &mask : nullptr);
  Errors e;
  double num = 0, den = 0, worst = 0, peak = 0;
  accumulate(e, num, den, worst, peak, out, ref.o, 0, c.label());
  if (std::isinf(e.rel_l2)) return e;
  e.rel_l2 = std::sqrt(num / std::max(den, 1e-30));
  e.worst_rel = worst / std::max(peak, 1e-30);
  lse_error(e, lse, ref.lse, logit_bounds(qr, k.dequant, M, N, c.hq, c.hk, D, 1.0 / std::sqrt(double(D))), 0);
  return e;
}

void check_errors(const Errors& e, const std::string& label) {
  INFO(label << ": rel L2 " << e.rel_l2 << ", worst / max|ref| " << e.worst_rel << ", lse " << e.lse_raw
             << " (" << e.lse_abs << " beyond the accumulator's allowance)");
  CHECK(e.rel_l2 <= kRelL2);
  CHECK(e.worst_rel <= kWorstRel);
  CHECK(e.lse_abs <= kLseAbs);
}

std::vector<Fp8Case> single_grid() {
  std::vector<Fp8Case> out;
  const int groups[][2] = {{4, 4}, {8, 2}, {14, 2}};  // GQA 1, 4, 7
  int turn = 0;
  for (int64_t qo : {1, 127, 129, 1000, 2048})
    for (int64_t kv : {int64_t(1), int64_t(127), int64_t(129), int64_t(1000), int64_t(2048)}) {
      if (kv < qo && kv != 1) continue;  // keep the grid small: append shapes, and one key
      for (bool causal : {false, true}) {
        Fp8Case c;
        c.qo = qo;
        c.kv = kv;
        c.hq = groups[turn % 3][0];
        c.hk = groups[turn % 3][1];
        c.o = turn % 2 ? DType::F16 : DType::BF16;
        c.causal = causal;
        ++turn;
        out.push_back(c);
      }
    }
  Fp8Case custom;
  custom.qo = 129;
  custom.kv = 1000;
  custom.hq = 14;
  custom.hk = 2;
  custom.custom = true;
  out.push_back(custom);
  Fp8Case win;
  win.qo = 1000;
  win.kv = 2048;
  win.hq = 8;
  win.hk = 2;
  win.causal = true;
  win.window_left = 127;
  win.o = DType::F16;
  out.push_back(win);
  for (DType o : {DType::BF16, DType::F16}) {  // the planner's own choice
    Fp8Case a;
    a.qo = 1000;
    a.kv = 1000;
    a.hq = 14;
    a.hk = 2;
    a.causal = true;
    a.o = o;
    a.backend = "auto";
    out.push_back(a);
  }
  return out;
}

}  // namespace

TEST_CASE("fp8 single prefill on fa3_ws matches the float64 reference of the dequantized inputs",
          "[gpu][prefill][fa3_ws][fp8]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  if (!on_sm90a(rt, "fp8 prefill (fa3_ws)")) return;
  uint32_t seed = 1;
  for (const Fp8Case& c : single_grid()) {
    INFO(c.label());
    check_errors(run_single(rt, c, seed++), c.label());
  }
}

TEST_CASE("fp8 single prefill honours scale_q and scale_v", "[gpu][prefill][fa3_ws][fp8]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  if (!on_sm90a(rt, "fp8 prefill (fa3_ws)")) return;
  Fp8Case c;
  c.qo = 300;
  c.kv = 700;
  c.hq = 8;
  c.hk = 2;
  check_errors(run_single(rt, c, 77), c.label());
  // Against a reference that ignores scale_q (the softmax sharpness) or scale_v (the output's size),
  // the same output is far outside the tolerance.
  const Errors no_q = run_single(rt, c, 77, 1), no_v = run_single(rt, c, 77, 2);
  CHECK(no_q.rel_l2 > 5 * kRelL2);
  CHECK(no_v.rel_l2 > 5 * kRelL2);
}

TEST_CASE("fp8 ragged batch prefill on fa3_ws matches the float64 reference", "[gpu][batch_prefill][fa3_ws][fp8]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  if (!on_sm90a(rt, "fp8 prefill (fa3_ws)")) return;
  const int D = 128;
  for (const char* backend : {"fa3_ws", "auto"})
    for (DType o_dtype : {DType::BF16, DType::F16})
      for (bool causal : {false, true}) {
        const int hq = 14, hk = 2;
        const std::vector<int32_t> qo_lens = {1, 129, 1000}, kv_lens = {127, 2048, 1000};
        std::vector<int32_t> qo_indptr = {0}, kv_indptr = {0};
        for (size_t b = 0; b < qo_lens.size(); ++b) {
          qo_indptr.push_back(qo_indptr.back() + qo_lens[b]);
          kv_indptr.push_back(kv_indptr.back() + kv_lens[b]);
        }
        const int64_t nq = qo_indptr.back(), nk = kv_indptr.back();
        std::mt19937 rng(causal ? 5 : 6);
        // Scalar calibration scales (FlashInfer's run(q_scale, k_scale, v_scale)): q_scale * k_scale
        // multiplies the logits' scale, v_scale the output; the stored values are e4m3 with no per-head scale.
        const float q_scale = 0.75f, k_scale = 1.5f, v_scale = 1.25f;
        const std::vector<float> ones_q(size_t(hq), 1.f), ones_k(size_t(hk), 1.f);
        const Quantized q = quantize(rng, nq, hq, D, 3.f, ones_q), k = quantize(rng, nk, hk, D, 3.f, ones_k),
                        v = quantize(rng, nk, hk, D, 2.f, ones_k);
        const std::string label = fmt::format("ragged {} o={} {}", backend, to_string(o_dtype),
                                              causal ? "causal" : "nomask");
        INFO(label);
        DeviceBuffer ws(256 << 20), dq(q.bytes.size()), dk(k.bytes.size()), dv(v.bytes.size()),
            dout(size_t(nq * hq * D * 2)), dlse(size_t(nq * hq * 4));
        dq.upload(q.bytes);
        dk.upload(k.bytes);
        dv.upload(v.bytes);
        dout.poison();
        dlse.poison();
        BatchPrefillWithRaggedKVCacheWrapper w(rt, ws.get(), ws.bytes(), KVLayout::NHD, backend);
        BatchPrefillPlanOptions po;
        po.causal = causal;
        po.q_data_type = DType::E4M3;
        po.kv_data_type = DType::E4M3;
        po.o_data_type = o_dtype;
        w.plan(qo_indptr, kv_indptr, hq, hk, D, po, nullptr);
        CHECK(w.describe().find("fa3ws") != std::string::npos);
        const TensorView tq = make_tensor(dq.get(), DType::E4M3, {nq, hq, D});
        const TensorView tk = make_tensor(dk.get(), DType::E4M3, {nk, hk, D});
        const TensorView tv = make_tensor(dv.get(), DType::E4M3, {nk, hk, D});
        const TensorView to = make_tensor(dout.get(), o_dtype, {nq, hq, D});
        const TensorView tl = make_tensor(dlse.get(), DType::F32, {nq, hq});
        w.run(tq, tk, tv, to, &tl, q_scale * k_scale, v_scale, nullptr);
        ATTNJIT_CU(cuda::driver().CtxSynchronize());
        const auto out = decode(o_dtype, dout.download());
        const auto lse = decode(DType::F32, dlse.download());
        Errors e;
        double num = 0, den = 0, worst = 0, peak = 0;
        for (size_t b = 0; b < qo_lens.size(); ++b) {
          PrefillOptions ro;
          ro.causal = causal;
          ro.return_lse = true;
          ro.k_scale = q_scale * k_scale;
          ro.v_scale = v_scale;
          auto slice = [&](const std::vector<double>& all, int64_t row0, int64_t rows, int heads) {
            return std::vector<double>(all.begin() + row0 * heads * D, all.begin() + (row0 + rows) * heads * D);
          };
          const auto qb = slice(q.dequant, qo_indptr[b], qo_lens[b], hq);
          const auto kb = slice(k.dequant, kv_indptr[b], kv_lens[b], hk);
          const auto ref = reference_prefill({hq, hk, D, qo_lens[b], kv_lens[b]}, ro, qb, kb,
                                             slice(v.dequant, kv_indptr[b], kv_lens[b], hk), nullptr);
          accumulate(e, num, den, worst, peak, out, ref.o, size_t(qo_indptr[b]) * hq * D, label);
          lse_error(e, lse, ref.lse,
                    logit_bounds(qb, kb, qo_lens[b], kv_lens[b], hq, hk, D, q_scale * k_scale / std::sqrt(double(D))),
                    size_t(qo_indptr[b]) * hq);
        }
        if (std::isinf(e.rel_l2)) continue;
        e.rel_l2 = std::sqrt(num / std::max(den, 1e-30));
        e.worst_rel = worst / std::max(peak, 1e-30);
        check_errors(e, label);
      }
}

}  // namespace attnjit::test

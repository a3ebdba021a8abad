// Batch decode on the GPU against the double-precision reference (single
// decode's, per request, on the request's gathered rows), through all three
// entry points: page sizes 1 and 16, lengths off page boundaries and of 1,
// skewed batches, groups 1/4/5/7/8, head dims 64/128/256, f16/bf16 (and fp8
// KV), NHD/HND, lse by absolute error (base 2); and a CUDA graph captured
// once and replayed after a new plan. Skips without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>

#include "attnjit/attnjit.hpp"
#include "support/captured_graph.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "support/decode_entry_args.hpp"
#include "support/paged_kv_device.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/sample_values.hpp"
#include "reference/token_reference.hpp"

namespace attnjit::test {
namespace {

enum class Entry { FlashInfer, TrtLlm, Cudnn };
const char* name(Entry e) { return e == Entry::FlashInfer ? "flashinfer" : e == Entry::TrtLlm ? "trtllm" : "cudnn"; }

struct Case {
  Entry entry = Entry::FlashInfer;
  std::vector<int32_t> lens;
  int page_size = 16, hq = 8, hkv = 2, d = 128;
  DType q = DType::BF16, kv = DType::BF16;
  KVLayout layout = KVLayout::NHD;
  bool tc = false;
  int window_left = -1;
  bool sinks = false;            // TensorRT-LLM only: sink_logit(h) per head
  std::optional<bool> pdl;       // TensorRT-LLM only: enable_pdl (unset: on from sm_90)
  bool ragged = false;           // cuDNN only: q and out rows at shuffled batch_offsets_q / _o, padded apart
  std::string label() const {
    return fmt::format("{} batch={} ps={} {}q/{}kv d={} {}/{} {} tc={} window={} sinks={} pdl={} ragged={} lens[0]={}",
                       name(entry), lens.size(), page_size, hq, hkv, d, to_string(q), to_string(kv),
                       to_string(layout), tc, window_left, sinks, pdl ? (*pdl ? "on" : "off") : "auto", ragged,
                       lens[0]);
  }
};

// The serving shape of issue 6's benchmarks: 32 query / 8 KV heads on tensor cores.
Case gqa_case(Entry entry, std::vector<int32_t> lens, KVLayout layout) {
  Case c;
  c.entry = entry;
  c.hq = 32;
  c.hkv = 8;
  c.tc = true;
  c.layout = layout;
  c.lens = std::move(lens);
  return c;
}

using Errors = TokenErrors;
using Batch = PagedBatch;

// One query token per request.
PagedBatchShape shape_of(const Case& c) { return paged_shape_of(c, c.lens, static_cast<int64_t>(c.lens.size())); }
Batch make_batch(const Case& c, uint32_t seed) { return make_paged_batch(shape_of(c), seed); }

// Max over requests of the rel. L2 error of o, and of the abs. error of lse (null: not checked).
Errors compare(const Case& c, const Batch& b, const std::vector<double>& out, const std::vector<double>* lse) {
  const std::vector<double> sinks = sink_logits(c.hq);
  TokenReference ref = token_reference_of(c, c.lens, std::vector<int32_t>(c.lens.size(), 1));
  ref.window_left = c.window_left;
  ref.sinks = c.sinks ? &sinks : nullptr;
  return compare_tokens(ref, b, out, lse);
}

// cuDNN's ragged rows: request b's row of q (out) in slot perm[b] of a
// buffer whose rows are `stride` elements apart (a gap after each), at element
// offsets[b] = perm[b] * stride; [batch + 1] entries, cuDNN's cumulative form
// (the last one is never read).
struct RaggedRows {
  int64_t stride;
  std::vector<int32_t> offsets;
};
RaggedRows ragged_rows(int64_t batch, int64_t row_elems, uint32_t seed) {
  RaggedRows r{row_elems + 24, std::vector<int32_t>(size_t(batch) + 1)};
  std::vector<int32_t> perm(static_cast<size_t>(batch));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  for (int64_t i = 0; i < batch; ++i) r.offsets[size_t(i)] = int32_t(perm[size_t(i)] * r.stride);
  r.offsets.back() = int32_t(batch * r.stride);
  return r;
}

// Rows of `bytes` (row_bytes each, packed) to / from the ragged slots.
std::vector<uint8_t> scatter_rows(const std::vector<uint8_t>& bytes, const RaggedRows& r, size_t row_bytes,
                                  size_t elem) {
  std::vector<uint8_t> big((r.offsets.size() - 1) * r.stride * elem, 0xFF);
  for (size_t i = 0; i + 1 < r.offsets.size(); ++i)
    std::memcpy(&big[size_t(r.offsets[i]) * elem], &bytes[i * row_bytes], row_bytes);
  return big;
}
std::vector<uint8_t> gather_rows(const std::vector<uint8_t>& big, const RaggedRows& r, size_t row_bytes, size_t elem) {
  std::vector<uint8_t> bytes((r.offsets.size() - 1) * row_bytes);
  for (size_t i = 0; i + 1 < r.offsets.size(); ++i)
    std::memcpy(&bytes[i * row_bytes], &big[size_t(r.offsets[i]) * elem], row_bytes);
  return bytes;
}

// out_bits: the output's bytes as the GPU wrote them (for bitwise comparisons).
Errors run_case(const Runtime& rt, const Case& c, uint32_t seed, std::vector<uint8_t>* out_bits = nullptr) {
  cuda::ScopedDevice scope(0);
  DevicePagedBatch d(shape_of(c), seed);
  const Batch& b = d.host;
  const int64_t B = d.batch(), H = c.hq, D = c.d;
  const size_t qe = dtype_size(c.q), row_bytes = size_t(H * D) * qe;
  const RaggedRows rq = ragged_rows(B, H * D, seed), ro = ragged_rows(B, H * D, seed + 7777);
  if (c.ragged) {  // q and out rows `stride` apart, at shuffled offsets that stay inside the tensors
    d.q = DeviceBuffer(B * rq.stride * qe);
    d.q.upload(scatter_rows(b.qb, rq, row_bytes, qe));
    d.out = DeviceBuffer(B * ro.stride * qe);
    d.out.poison();
  }
  TensorView tq = d.q_view(), to = d.out_view();
  if (c.ragged) {
    tq.strides[0] = rq.stride;
    to.strides[0] = ro.stride;
  }
  const TensorView tk = d.cache_view(d.k), tv = d.cache_view(d.v), tl = d.lse_view();
  DeviceBuffer ws(128 << 20);
  const bool with_lse = c.entry != Entry::Cudnn;
  if (c.entry == Entry::FlashInfer) {
    BatchDecodeWithPagedKVCacheWrapper w(rt, ws.get(), ws.bytes(), c.layout, false, c.tc);
    w.plan(b.indptr, b.indices, b.last, wrapper_plan_args(d.shape, c.window_left));
    w.run(tq, tk, tv, to, &tl);
  } else if (c.entry == Entry::TrtLlm) {
    const DeviceBuffer sinks = upload_floats(sink_logits(c.hq));
    TrtllmDecodeArgs a = trtllm_args(d);
    a.window_left = c.window_left;
    a.use_tensor_cores = c.tc;
    a.sinks = c.sinks ? sinks.as<float>() : nullptr;
    a.enable_pdl = c.pdl;
    trtllm_batch_decode_with_kv_cache(rt, tq, tk, tv, ws.get(), ws.bytes(), a, to, &tl);
    ATTNJIT_CU(cuda::driver().CtxSynchronize());  // before the sinks go out of scope
  } else {
    CudnnDecodeArgs a = cudnn_args(d);
    const DeviceBuffer q_offsets = upload_ints(rq.offsets), o_offsets = upload_ints(ro.offsets);
    if (c.ragged) {
      a.batch_offsets_q = q_offsets.as<int32_t>();
      a.batch_offsets_o = o_offsets.as<int32_t>();
    }
    cudnn_batch_decode_with_kv_cache(rt, tq, tk, tv, ws.get(), ws.bytes(), a, to);
    ATTNJIT_CU(cuda::driver().CtxSynchronize());  // before the offsets go out of scope
  }
  ATTNJIT_CU(cuda::driver().CtxSynchronize());
  std::vector<uint8_t> out_bytes = d.out.download();
  if (c.ragged) {
    // Nothing but the rows may be written: every gap byte keeps its poison.
    const auto untouched = scatter_rows(gather_rows(out_bytes, ro, row_bytes, qe), ro, row_bytes, qe);
    if (untouched != out_bytes) return {INFINITY, INFINITY};
    out_bytes = gather_rows(out_bytes, ro, row_bytes, qe);
  }
  if (out_bits) *out_bits = out_bytes;
  const auto out = decode(c.q, out_bytes);
  const auto lse = decode(DType::F32, d.lse.download());
  return compare(c, b, out, with_lse ? &lse : nullptr);
}

std::vector<Case> grid() {
  std::vector<Case> cases;
  int turn = 0;
  const std::vector<std::vector<int32_t>> batches = {
      {1, 17, 33, 300, 1000}, {2000, 5, 64, 1, 129}, {3000, 7}, {700}};
  for (int ps : {1, 16})
    for (int group : {1, 4, 5, 7, 8})
      for (int d : {64, 128, 256})
        for (DType q : {DType::BF16, DType::F16}) {
          Case c;
          c.entry = static_cast<Entry>(turn % 3);
          c.page_size = ps;
          c.hkv = 1 + turn % 2;
          c.hq = c.hkv * group;
          c.d = d;
          c.q = q;
          c.kv = turn % 7 == 3 ? DType::E4M3 : q;
          c.layout = c.entry == Entry::Cudnn ? KVLayout::HND : (turn % 2 ? KVLayout::HND : KVLayout::NHD);
          c.tc = turn % 4 >= 2;
          // cuDNN's entry has no sliding window.
          c.window_left = turn % 5 == 4 && c.entry != Entry::Cudnn ? 100 : -1;
          c.lens = batches[turn % batches.size()];
          c.sinks = c.entry == Entry::TrtLlm && turn % 2 == 0;
          cases.push_back(c);
          ++turn;
        }
  // A last round of few items: with 8 KV heads a wave of 132 SMs runs 33
  // requests. Host lengths (the FlashInfer wrapper): the planner cuts the
  // 34th (and the 67th) into pieces that merge in the kernel; lengths on
  // the device (TensorRT-LLM): every request of 34 x 3000 in four chunks,
  // merged by the merge kernel (ops/batch_decode/batch_decode_planner.hpp).
  const size_t tail_cases = cases.size();
  {
    Case c = gqa_case(Entry::TrtLlm, std::vector<int32_t>(34, 3000), KVLayout::HND);
    c.lens[5] = 1;  // shorter than the chunks past its first: empty chunks merge to nothing
    c.sinks = true;
    cases.push_back(c);
  }
  for (int batch : {34, 67}) {
    Case c = gqa_case(Entry::FlashInfer, std::vector<int32_t>(batch, batch == 34 ? 600 : 333),
                      batch == 34 ? KVLayout::NHD : KVLayout::HND);
    c.kv = batch == 34 ? DType::BF16 : DType::E4M3;
    cases.push_back(c);
  }
  // Skewed: one long request beside many short ones, each entry point.
  for (Entry e : {Entry::FlashInfer, Entry::TrtLlm, Entry::Cudnn}) {
    Case c;
    c.entry = e;
    c.hq = 32;
    c.hkv = 8;
    c.layout = e == Entry::FlashInfer ? KVLayout::NHD : KVLayout::HND;
    c.tc = e != Entry::Cudnn;
    c.lens.assign(40, 77);
    c.lens[3] = 20000;
    c.sinks = e == Entry::TrtLlm;  // split KV: the merge kernel adds the sinks
    cases.push_back(c);
  }
  // cuDNN's ragged batch_offsets_q / _o: shuffled, padded rows; one fits a
  // CTA per request, one splits its long request (the merge kernel writes that
  // row), CUDA and tensor cores.
  for (bool tc : {false, true}) {
    Case c;
    c.entry = Entry::Cudnn;
    c.layout = KVLayout::HND;
    c.hq = tc ? 32 : 5;
    c.hkv = tc ? 8 : 5;
    c.tc = tc;
    c.ragged = true;
    c.lens = tc ? std::vector<int32_t>{9000, 3, 129, 700, 1} : std::vector<int32_t>{17, 300, 1, 64};
    cases.push_back(c);
  }
  // ATTNJIT_TEST_GRID=reduced (compute-sanitizer, 10-100x slower): every
  // fifth case of the main grid, which cycles entry point, dtype, head dim,
  // group, page size, tensor cores and fp8, plus every tenth from the ninth
  // (the windows), the first cut tail and the first skewed batch.
  if (const char* g = std::getenv("ATTNJIT_TEST_GRID"); g && std::string(g) == "reduced") {
    std::vector<Case> reduced;
    for (size_t i = 0; i < tail_cases; ++i)
      if (i % 5 == 0 || i % 10 == 9) reduced.push_back(cases[i]);
    reduced.push_back(cases[tail_cases]);
    reduced.push_back(cases[tail_cases + 1]);
    reduced.push_back(cases[cases.size() - 5]);
    reduced.push_back(cases.back());  // ragged, split
    return reduced;
  }
  return cases;
}

}  // namespace

TEST_CASE("batch decode matches the float64 reference through all three entry points", "[gpu][batch_decode]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  check_token_grid(
      grid(), 1, "batch decode grid", 34, [&](const Case& c, uint32_t seed) { return run_case(rt, c, seed); },
      [](const Case& c) { return fmt::format("{} {}/{}", name(c.entry), to_string(c.q), to_string(c.kv)); });
}

TEST_CASE("TensorRT-LLM batch decode gives the same bits with programmatic dependent launch on and off",
          "[gpu][batch_decode][pdl]") {
  ATTNJIT_REQUIRE_GPU();
  Runtime rt;
  if (std::atoi(rt.default_arch().c_str() + 3) < 90) {
    WARN("PDL needs sm_90: enable_pdl=true must be refused here");
    Case c;
    c.entry = Entry::TrtLlm;
    c.lens = {100};
    c.pdl = true;
    CHECK_THROWS(run_case(rt, c, 1));
    return;
  }
  // Split KV (decode then merge kernel, both launched with the attribute),
  // sinks, fp8 and bf16, CUDA and tensor cores.
  for (DType kv : {DType::BF16, DType::E4M3})
    for (bool tc : {false, true}) {
      Case c = gqa_case(Entry::TrtLlm, std::vector<int32_t>(24, 300), KVLayout::HND);
      c.kv = kv;
      c.tc = tc;
      c.sinks = true;
      c.lens[5] = 9000;
      INFO(c.label());
      std::vector<uint8_t> off, on;
      c.pdl = false;
      const Errors e_off = run_case(rt, c, 21, &off);
      c.pdl = true;
      const Errors e_on = run_case(rt, c, 21, &on);
      CHECK(e_off.o_rel <= o_tol(c.q));
      CHECK(e_off.lse_abs <= lse_tol(c.q));
      CHECK(e_on.o_rel == e_off.o_rel);
      CHECK(on == off);
    }
}

TEST_CASE("batch decode in a CUDA graph replays correctly after a new plan", "[gpu][batch_decode][graph]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  constexpr int kMaxBatch = 16, kMaxPages = 4096;
  Case c;
  c.hq = 16;
  c.hkv = 4;
  c.tc = true;
  c.lens = {5000, 1, 33, 900, 16};
  Case c2 = c;
  c2.lens = {7, 12000, 64, 65, 300, 2, 1, 4000, 17};
  const Batch b1 = make_batch(c, 11), b2 = make_batch(c2, 12);
  // One cache big enough for both batches' pages; each batch's rows at its own page ids.
  const int64_t H = c.hq, Hk = c.hkv, D = c.d, ps = c.page_size;
  const int64_t P = std::max(b1.num_pages, b2.num_pages);
  const size_t page_bytes = size_t(ps) * Hk * D * 2;
  DeviceBuffer dk(P * page_bytes), dv(P * page_bytes), dq(kMaxBatch * H * D * 2), dout(kMaxBatch * H * D * 2),
      dlse(kMaxBatch * H * 4), ws(64 << 20), indptr(4 * (kMaxBatch + 1)), indices(4 * kMaxPages), last(4 * kMaxBatch);
  BatchDecodeWithPagedKVCacheWrapper w(rt, ws.get(), ws.bytes(), KVLayout::NHD, true, true,
                                       static_cast<int32_t*>(indptr.get()), static_cast<int32_t*>(indices.get()),
                                       static_cast<int32_t*>(last.get()), kMaxBatch, kMaxPages);
  BatchDecodeWithPagedKVCacheWrapper::PlanArgs a;
  a.num_qo_heads = c.hq;
  a.num_kv_heads = c.hkv;
  a.head_dim = c.d;
  a.page_size = c.page_size;
  a.q_data_type = a.kv_data_type.emplace(DType::BF16);

  CUstream stream;
  ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  auto load = [&](const Batch& b) {
    std::vector<uint8_t> k(P * page_bytes, 0), v(P * page_bytes, 0);
    std::copy(b.kb.begin(), b.kb.end(), k.begin());
    std::copy(b.vb.begin(), b.vb.end(), v.begin());
    dk.upload(k);
    dv.upload(v);
    std::vector<uint8_t> q(dq.bytes(), 0);
    std::copy(b.qb.begin(), b.qb.end(), q.begin());
    dq.upload(q);
    dout.poison();
    dlse.poison();
  };
  // Tensors over the fixed buffers; q/out/lse views of the current batch share their base pointers.
  auto views = [&](int batch) {
    return std::array<TensorView, 5>{make_tensor(dq.get(), DType::BF16, {batch, H, D}),
                                     make_tensor(dk.get(), DType::BF16, {P, ps, Hk, D}),
                                     make_tensor(dv.get(), DType::BF16, {P, ps, Hk, D}),
                                     make_tensor(dout.get(), DType::BF16, {batch, H, D}),
                                     make_tensor(dlse.get(), DType::F32, {batch, H})};
  };

  load(b1);
  w.plan(b1.indptr, b1.indices, b1.last, a, stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  auto t = views(static_cast<int>(c.lens.size()));
  const CapturedGraph graph(stream, [&] { w.run(t[0], t[1], t[2], t[3], &t[4], {}, {}, stream); });
  graph.launch(stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  auto check = [&](const Case& cc, const Batch& b) {
    const auto out = decode(DType::BF16, dout.download());
    const auto lse = decode(DType::F32, dlse.download());
    const Errors e = compare(cc, b, out, &lse);
    INFO(cc.label());
    CHECK(e.o_rel <= o_tol(DType::BF16));
    CHECK(e.lse_abs <= lse_tol(DType::BF16));
  };
  check(c, b1);

  // A new plan (larger batch, other lengths and pages), then the same graph.
  load(b2);
  w.plan(b2.indptr, b2.indices, b2.last, a, stream);
  graph.launch(stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  check(c2, b2);
  cu.StreamDestroy(stream);
}

}  // namespace attnjit::test

// Batch prefill in CUDA-graph mode reads qo_indptr (paged and ragged
// wrappers) and the ragged kv_indptr from the caller's fixed buffers, which
// the caller may overwrite after plan(). A bad entry there (past q's or k's
// rows, decreasing, negative) must not fault or write outside the tensors:
// the kernels void that request (no query rows: nothing written; no keys:
// zeros), keep computing the others, and the next run() names the entry,
// its value and what was allowed. Each case: a graph captured after plan()
// and replayed on the good buffers, then on the spoiled one; every other
// request matches the clean replay bit for bit and the float64 reference;
// rows no request owns, and the bytes past o, stay unwritten; the call after
// the error is clean. For fa2, fa3 and fa3_ws (the last two on sm_90a), and
// fa2 at head_dim 512 (two CTAs per item). Skips without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attnjit/attnjit.hpp"
#include "support/device_buffer.hpp"
#include "support/error_capture.hpp"
#include "support/gpu_support.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/prefill_reference.hpp"

namespace attnjit::test {
namespace {

using Catch::Matchers::Contains;

constexpr int kHq = 8, kHk = 2, kPage = 16;
// Four causal requests; the spoiled entries void request 3 (the last entry)
// or request 0 (the first). q and o have kSpare rows past the plan's (CUDA-graph
// mode allows more: they count as q's rows), o's buffer kPast more past the tensor.
const std::vector<int32_t> kQoLens = {17, 1, 64, 5}, kKvLens = {300, 77, 1000, 5};
constexpr int64_t kSpare = 3, kPast = 4;

// One wrapper in CUDA-graph mode over random bf16 q, K and V, its good plan
// made and one run captured.
struct GraphPrefill {
  bool paged;
  int d;
  std::vector<int32_t> qo_indptr{0}, kv_indptr{0}, page_ids, last_page_len;  // kv_indptr: rows, or pages (paged)
  int64_t rows = 0, kv_rows = 0;  // q's rows (the plan's and the spare ones); k's rows (paged: pages * kPage)
  std::vector<double> q, k, v;    // as bf16 rounds them
  DeviceBuffer dq, dk, dv, out, lse, qo_buf, kv_buf, ids_buf, last_buf, ws;
  std::optional<BatchPrefillWithPagedKVCacheWrapper> paged_w;
  std::optional<BatchPrefillWithRaggedKVCacheWrapper> ragged_w;
  CUstream stream = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;

  GraphPrefill(Runtime& rt, bool paged_, const std::string& backend, int head_dim, uint32_t seed)
      : paged(paged_), d(head_dim) {
    const auto& cu = cuda::driver();
    for (size_t b = 0; b < kQoLens.size(); ++b) {
      qo_indptr.push_back(qo_indptr.back() + kQoLens[b]);
      const int32_t pages = (kKvLens[b] + kPage - 1) / kPage;
      for (int32_t i = 0; i < pages; ++i) page_ids.push_back(int32_t(page_ids.size()));  // pages in order
      last_page_len.push_back(kKvLens[b] - (pages - 1) * kPage);
      kv_indptr.push_back(kv_indptr.back() + (paged ? pages : kKvLens[b]));
    }
    rows = qo_indptr.back() + kSpare;
    kv_rows = paged ? int64_t(page_ids.size()) * kPage : kv_indptr.back();
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    auto upload = [&](int64_t n, float scale, std::vector<double>& exact) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& e : x) e = uni(rng) * scale;
      std::vector<uint8_t> bytes;
      exact = encode(DType::BF16, x, bytes);
      DeviceBuffer buf(bytes.size());
      buf.upload(bytes);
      return buf;
    };
    dq = upload(rows * kHq * d, 2.f, q);
    dk = upload(kv_rows * kHk * d, 2.f, k);
    dv = upload(kv_rows * kHk * d, 1.f, v);
    out = DeviceBuffer(size_t(rows + kPast) * kHq * d * 2);
    lse = DeviceBuffer(size_t(rows) * kHq * 4);
    qo_buf = DeviceBuffer(4 * 5);
    kv_buf = DeviceBuffer(4 * 5);
    ids_buf = DeviceBuffer(4 * page_ids.size());
    last_buf = DeviceBuffer(4 * 4);
    ws = DeviceBuffer(64 << 20);
    BatchPrefillCudaGraphBuffers g;
    g.max_batch_size = 4;
    g.qo_indptr = static_cast<int32_t*>(qo_buf.get());
    g.kv_indptr = static_cast<int32_t*>(kv_buf.get());
    if (paged) {
      g.paged_kv_indices = static_cast<int32_t*>(ids_buf.get());
      g.max_num_pages = int64_t(page_ids.size());
      g.paged_kv_last_page_len = static_cast<int32_t*>(last_buf.get());
      paged_w.emplace(rt, ws.get(), ws.bytes(), g, KVLayout::NHD, backend);
    } else {
      ragged_w.emplace(rt, ws.get(), ws.bytes(), g, KVLayout::NHD, backend);
    }
    ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    plan();
    ATTNJIT_CU(cu.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    run();
    ATTNJIT_CU(cu.StreamEndCapture(stream, &graph));
    ATTNJIT_CU(cu.GraphInstantiate(&exec, graph, 0));
  }
  ~GraphPrefill() {
    const auto& cu = cuda::driver();
    if (exec) cu.GraphExecDestroy(exec);
    if (graph) cu.GraphDestroy(graph);
    if (stream) cu.StreamDestroy(stream);
  }

  void plan() {
    BatchPrefillPlanOptions o;
    o.causal = true;
    o.q_data_type = DType::BF16;
    if (paged) paged_w->plan(qo_indptr, kv_indptr, page_ids, last_page_len, kHq, kHk, d, kPage, o, stream);
    else ragged_w->plan(qo_indptr, kv_indptr, kHq, kHk, d, o, stream);
    ATTNJIT_CU(cuda::driver().StreamSynchronize(stream));
  }
  void run() {
    const auto tq = make_tensor(dq.get(), DType::BF16, {rows, kHq, d});
    const auto to = make_tensor(out.get(), DType::BF16, {rows, kHq, d});
    const auto tl = make_tensor(lse.get(), DType::F32, {rows, kHq});
    if (paged) {
      const int64_t P = int64_t(page_ids.size());
      paged_w->run(tq, make_tensor(dk.get(), DType::BF16, {P, kPage, kHk, d}),
                   make_tensor(dv.get(), DType::BF16, {P, kPage, kHk, d}), to, &tl, stream);
    } else {
      ragged_w->run(tq, make_tensor(dk.get(), DType::BF16, {kv_rows, kHk, d}),
                    make_tensor(dv.get(), DType::BF16, {kv_rows, kHk, d}), to, &tl, stream);
    }
  }
  // The captured run on poisoned outputs; returns o's buffer. A fault would throw here.
  std::vector<uint8_t> replay() {
    out.poison();
    lse.poison();
    ATTNJIT_CU(cuda::driver().GraphLaunch(exec, stream));
    ATTNJIT_CU(cuda::driver().StreamSynchronize(stream));
    return out.download();
  }
  // Overwrites entry i of a fixed index buffer, as a caller may between replays.
  void write(const DeviceBuffer& buf, int i, int32_t value) {
    ATTNJIT_CU(cuda::driver().MemcpyHtoD(reinterpret_cast<CUdeviceptr>(buf.get()) + 4 * i, &value, 4));
  }

  size_t row_bytes() const { return size_t(kHq) * d * 2; }
  // Request b's relative L2 error in o against the float64 reference.
  double error(const std::vector<uint8_t>& o_bytes, int b) const {
    const std::vector<double> o = decode(DType::BF16, o_bytes);
    const int64_t M = kQoLens[b], N = kKvLens[b], q0 = qo_indptr[b];
    const std::vector<double> qb(q.begin() + q0 * kHq * d, q.begin() + (q0 + M) * kHq * d);
    // Request b's keys start at row kv_indptr[b] (ragged) or its first page's first row (pages in order).
    const int64_t k0 = paged ? int64_t(kv_indptr[b]) * kPage : kv_indptr[b];
    const std::vector<double> kb(k.begin() + k0 * kHk * d, k.begin() + (k0 + N) * kHk * d),
        vb(v.begin() + k0 * kHk * d, v.begin() + (k0 + N) * kHk * d);
    PrefillOptions po;
    po.causal = true;
    const auto ref = reference_prefill({kHq, kHk, d, M, N}, po, qb, kb, vb, nullptr);
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.o.size(); ++i) {
      const double got = o[size_t(q0 * kHq * d) + i];
      if (!std::isfinite(got)) return INFINITY;
      num += (got - ref.o[i]) * (got - ref.o[i]);
      den += ref.o[i] * ref.o[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
  }
  // Request b's rows of o, equal to `want`'s.
  bool same_rows(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int b) const {
    return std::equal(got.begin() + qo_indptr[b] * row_bytes(), got.begin() + qo_indptr[b + 1] * row_bytes(),
                      want.begin() + qo_indptr[b] * row_bytes());
  }
  // Rows [from, to) of o all read as zero.
  bool rows_zero(const std::vector<uint8_t>& got, int64_t from, int64_t to) const {
    const std::vector<uint8_t> part(got.begin() + from * row_bytes(), got.begin() + to * row_bytes());
    const std::vector<double> x = decode(DType::BF16, part);
    return std::all_of(x.begin(), x.end(), [](double e) { return e == 0.0; });
  }
  // Rows [from, to) of o's buffer (to may pass the tensor) all hold `byte`.
  bool rows_hold(const std::vector<uint8_t>& got, int64_t from, int64_t to, uint8_t byte) const {
    return std::all_of(got.begin() + from * row_bytes(), got.begin() + to * row_bytes(),
                       [&](uint8_t x) { return x == byte; });
  }
};

// A spoiled entry of qo_indptr or kv_indptr, the request it voids, and the
// start of what the next run() must say.
struct Spoil {
  bool kv;  // kv_indptr (ragged) instead of qo_indptr
  int index;
  int32_t value;
  int voided;
  std::string message;
};

// The cases for one wrapper: its qo_indptr's last entry past q's rows, then
// before its request's first row, its first entry negative; the ragged
// kv_indptr's last entry past k's rows, then before its request's first row.
std::vector<Spoil> spoils(const GraphPrefill& t) {
  const int64_t R = t.rows, N = t.kv_rows;
  const int32_t q3 = t.qo_indptr[3], k3 = t.kv_indptr[3];
  std::vector<Spoil> s = {
      {false, 4, int32_t(R + 50), 3,
       fmt::format("qo_indptr[4]={} is not allowed: allowed {} to {} (request 3's query rows", R + 50, q3, R)},
      {false, 4, q3 - 2, 3, fmt::format("qo_indptr[4]={} is not allowed: allowed {} to {}", q3 - 2, q3, R)},
      {false, 0, -1, 0, fmt::format("qo_indptr[0]=-1 is not allowed: allowed 0 to {}", R)},
  };
  if (!t.paged) {
    s.push_back({true, 4, int32_t(N + 100), 3,
                 fmt::format("kv_indptr[4]={} is not allowed: allowed {} to {} (kv_indptr must not decrease, and k "
                             "has {} rows)",
                             N + 100, k3, N, N)});
    s.push_back({true, 4, k3 - 1, 3, fmt::format("kv_indptr[4]={} is not allowed: allowed {} to {}", k3 - 1, k3, N)});
  }
  return s;
}

// Plans and replays clean; then for each spoiled entry: replays, and finds
// no fault, the other requests as clean, the voided one unwritten (no query
// rows) or zeros (no keys), nothing past the requests' rows written; the
// next run() names the entry; once the entry is restored, a replay equals
// the clean one.
void check_spoils(Runtime& rt, bool paged, const std::string& backend, int head_dim, uint32_t seed) {
  INFO((paged ? "paged" : "ragged") << " backend " << backend << " head_dim " << head_dim);
  GraphPrefill t(rt, paged, backend, head_dim, seed);
  const std::vector<uint8_t> clean = t.replay();
  for (int b = 0; b < 4; ++b) {
    INFO("clean request " << b);
    CHECK(t.error(clean, b) <= 1e-2);
  }
  for (const Spoil& s : spoils(t)) {
    INFO((s.kv ? "kv_indptr[" : "qo_indptr[") << s.index << "]=" << s.value);
    const DeviceBuffer& buf = s.kv ? t.kv_buf : t.qo_buf;
    const std::vector<int32_t>& good = s.kv ? t.kv_indptr : t.qo_indptr;
    t.write(buf, s.index, s.value);
    const std::vector<uint8_t> got = t.replay();
    for (int b = 0; b < 4; ++b)
      if (b != s.voided) {
        INFO("request " << b);
        CHECK(t.same_rows(got, clean, b));
        CHECK(t.error(got, b) <= 1e-2);
      }
    const int64_t v0 = t.qo_indptr[s.voided], v1 = t.qo_indptr[s.voided + 1];
    if (s.kv) CHECK(t.rows_zero(got, v0, v1));  // no keys: an empty request's zeros
    else CHECK(t.rows_hold(got, v0, v1, 0xFF));  // no rows: untouched
    CHECK(t.rows_hold(got, t.qo_indptr.back(), t.rows + kPast, 0xFF));  // the spare rows, and past o
    CHECK_THAT(error_of([&] { t.run(); }, Status::InvalidArgument), Contains(s.message));
    t.write(buf, s.index, good[size_t(s.index)]);
    CHECK_NOTHROW(t.run());
    CHECK(t.replay() == clean);
    if (paged) CHECK_NOTHROW(t.paged_w->check());
    else CHECK_NOTHROW(t.ragged_w->check());
  }
}

}  // namespace

TEST_CASE("batch prefill in CUDA-graph mode: a bad qo_indptr or ragged kv_indptr entry voids its request and is named",
          "[gpu][table_check][graph][prefill_indptr]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const bool hopper = rt.default_arch() == "sm_90a";
  for (const char* backend : {"fa2", "fa3", "fa3_ws"}) {
    if (std::string(backend) != "fa2" && !hopper) continue;
    for (bool paged : {false, true}) check_spoils(rt, paged, backend, 128, paged ? 41 : 42);
  }
}

TEST_CASE("batch prefill in CUDA-graph mode at head_dim 512: a bad qo_indptr or kv_indptr entry is named",
          "[gpu][table_check][graph][prefill_indptr][d512]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  check_spoils(rt, false, "fa2", 512, 43);
}

}  // namespace attnjit::test

// Device-resident tables checked without a sync (issue 29, item 4): a
// block-table entry past the cache, a seq_len past max_seq_len, cuDNN's
// actual_seq_lens_kv past max_sequence_kv, TensorRT-LLM's cum_seq_lens_q and
// cuDNN's batch offsets outside their tensors (the request is voided: its
// rows are not written), a FlashInfer wrapper's fixed
// indices buffer overwritten before a CUDA-graph replay, a paged prefill's
// likewise, and an append with a page id past the cache. Each: the call
// returns (no fault: compute-sanitizer memcheck finds no read outside the
// cache), the good requests' output is still right (the float64 reference,
// or bit for bit a clean run's), the next call (or check()) raises
// INVALID_ARGUMENT naming the array, the index and the value, and the call
// after that is clean. And ATTNJIT_CHECK=1: the call itself raises. Skips
// without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attnjit/attnjit.hpp"
#include "attnjit/page.hpp"
#include "support/captured_graph.hpp"
#include "support/device_buffer.hpp"
#include "support/error_capture.hpp"
#include "support/gpu_support.hpp"
#include "support/decode_entry_args.hpp"
#include "support/paged_kv_device.hpp"
#include "reference/decode_grid.hpp"
#include "reference/decode_reference.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {
namespace {

using Catch::Matchers::Contains;

constexpr int kHq = 8, kHk = 2, kD = 128, kPage = 16;

// A batch of four requests (request 2 is the one the tests spoil), bf16,
// on the device with a workspace.
struct Decode : DevicePagedBatch {
  DeviceBuffer ws{64 << 20};
  Decode(std::vector<int32_t> lens, KVLayout layout, uint32_t seed)
      : DevicePagedBatch(batch_shape(std::move(lens), layout, 0), seed) {}
  // kHq x kD bf16 rows over pages of kPage, kHk KV heads; q_rows 0: one per request.
  static PagedBatchShape batch_shape(std::vector<int32_t> lens, KVLayout layout, int64_t q_rows) {
    const int64_t rows = q_rows ? q_rows : static_cast<int64_t>(lens.size());
    return PagedBatchShape{std::move(lens), kPage, kHq, kHk, kD, DType::BF16, DType::BF16, layout, rows};
  }
  void trtllm(const Runtime& rt, const TrtllmDecodeArgs& a) const {
    trtllm_batch_decode_with_kv_cache(rt, q_view(), cache_view(k), cache_view(v), ws.get(), ws.bytes(), a,
                                      out_view());
  }
  void cudnn(const Runtime& rt, const CudnnDecodeArgs& a) const {
    cudnn_batch_decode_with_kv_cache(rt, q_view(), cache_view(k), cache_view(v), ws.get(), ws.bytes(), a,
                                     out_view());
  }
  // Request r's o (after a sync) against the float64 reference: the relative L2 error.
  double error(int r) const {
    const auto got = decode(DType::BF16, out.download());
    static_assert(kD == 128);
    const SingleDecodeProblem sp = d128_decode_problem(kHq, kHk, shape.lens[r]);
    const size_t row = size_t(kHq) * kD;
    const std::vector<double> q_row(host.q.begin() + r * row, host.q.begin() + (r + 1) * row);
    const auto ref = reference_single_decode(sp, q_row, host.k_dense[r], host.v_dense[r], nullptr);
    return relative_l2(std::vector<double>(got.begin() + r * row, got.begin() + (r + 1) * row), ref.o);
  }
  // Every request but `skip` (-1: all) matches the reference.
  void check_outputs(int skip) const {
    for (int r = 0; r < static_cast<int>(batch()); ++r)
      if (r != skip) {
        INFO("request " << r << " of length " << shape.lens[r]);
        CHECK(error(r) <= 1e-2);
      }
  }
};

void sync() { ATTNJIT_CU(cuda::driver().CtxSynchronize()); }

// After a call that met a spoiled table: the next call (`good`, over clean
// tables) raises INVALID_ARGUMENT with `named` in its message, the one after
// it is clean, and so is Runtime::check.
void named_next_then_clean(const Runtime& rt, const std::function<void()>& good, const std::string& named) {
  CHECK_THAT(error_of(good, Status::InvalidArgument), Contains(named));
  CHECK_NOTHROW(good());
  sync();
  CHECK_NOTHROW(rt.check(0));
}

// The request the tests spoil, its length a few pages long.
const std::vector<int32_t> kLens = {300, 77, 1000, 5};
constexpr int kBad = 2;

// kLens with request kBad's length set to `length`, on the device.
DeviceBuffer lens_with_bad(int32_t length) {
  std::vector<int32_t> lens = kLens;
  lens[kBad] = length;
  return upload_ints(lens);
}

}  // namespace

TEST_CASE("TensorRT-LLM: a block-table entry past the cache reads no memory outside it; the next call names it",
          "[gpu][table_check]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  for (bool tc : {false, true}) {
    INFO("use_tensor_cores=" << tc);
    Decode d(kLens, KVLayout::HND, 31);
    std::vector<int32_t> bad_table = d.host.table;
    const int32_t bad_id = d.host.num_pages + 1234;
    bad_table[size_t(kBad) * d.host.max_pages + 7] = bad_id;
    const DeviceBuffer bad = upload_ints(bad_table);
    auto call = [&](const DeviceBuffer& table) {
      TrtllmDecodeArgs a = trtllm_args(d);
      a.block_tables = table.as<int32_t>();
      a.use_tensor_cores = tc;
      d.trtllm(rt, a);
    };
    d.out.poison();
    call(bad);  // returns: the kernel read page num_pages - 1 instead
    sync();
    d.check_outputs(kBad);
    const std::string msg = error_of([&] { call(d.table); }, Status::InvalidArgument);
    CHECK_THAT(msg, Contains(fmt::format("block_tables[{}][7]={} is not allowed: the cache has {} pages", kBad,
                                         bad_id, d.host.num_pages)));
    CHECK_THAT(msg, Contains("found by a run before this call"));
    d.out.poison();
    call(d.table);  // clean
    sync();
    d.check_outputs(-1);
    CHECK_NOTHROW(rt.check(0));

    // The same through Runtime::check, which waits for the device.
    call(bad);
    CHECK_THAT(error_of([&] { rt.check(0); }, Status::InvalidArgument),
               Contains(fmt::format("block_tables[{}][7]={}", kBad, bad_id)));
    CHECK_NOTHROW(call(d.table));
    sync();
  }
}

TEST_CASE("TensorRT-LLM: seq_lens past max_seq_len is read as max_seq_len and named by the next call",
          "[gpu][table_check]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  Decode d(kLens, KVLayout::NHD, 32);
  // The table holds 63 pages of 16 (1008 rows) per request; max_seq_len is 1000.
  const DeviceBuffer bad = lens_with_bad(5000);
  auto call = [&](const DeviceBuffer& lens) {
    TrtllmDecodeArgs a = trtllm_args(d);  // max_seq_len 1000, kLens' longest
    a.seq_lens = lens.as<int32_t>();
    a.window_left = 300;  // the window starts from the (clamped) length: still inside the table
    d.trtllm(rt, a);
  };
  d.out.poison();
  call(bad);
  sync();
  // A window of 300 keys leaves requests 0, 1 and 3 whole: the plain reference.
  for (int r : {0, 1, 3}) {
    INFO("request " << r);
    CHECK(d.error(r) <= 1e-2);
  }
  named_next_then_clean(rt, [&] { call(d.lens); },
                        fmt::format("seq_lens[{}]=5000 is not allowed: allowed 0 to max_seq_len=1000", kBad));
}

TEST_CASE("TensorRT-LLM: a cum_seq_lens_q entry past the query's rows voids that request and is named by the next call",
          "[gpu][table_check]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  // Four requests of 2, 4, 1 and 3 query tokens (max_q_len 4) over the KV lengths of kLens: 10 query rows.
  const std::vector<int32_t> good_cum = {0, 2, 6, 7, 10};
  const int64_t rows = 10, spare = 6;  // out has rows nothing may write past
  for (const int32_t last : {40, 5}) {  // past q's rows (and max_q_len); before the request's first row
    INFO("cum_seq_lens_q[4]=" << last);
    Decode d(kLens, KVLayout::HND, 33);
    const PagedBatch qb = make_paged_batch(Decode::batch_shape(kLens, KVLayout::HND, rows), 34);
    DeviceBuffer q(qb.qb.size()), out(size_t(rows + spare) * kHq * kD * 2);
    q.upload(qb.qb);
    std::vector<int32_t> bad_cum = good_cum;
    bad_cum[4] = last;
    const DeviceBuffer good = upload_ints(good_cum), bad = upload_ints(bad_cum);
    auto call = [&](const DeviceBuffer& cum) {
      TrtllmDecodeArgs a = trtllm_args(d);
      a.cum_seq_lens_q = cum.as<int32_t>();
      a.max_q_len = 4;
      a.batch_size = static_cast<int>(kLens.size());
      trtllm_batch_decode_with_kv_cache(rt, make_tensor(q.get(), DType::BF16, {rows, kHq, kD}), d.cache_view(d.k),
                                        d.cache_view(d.v), d.ws.get(), d.ws.bytes(), a,
                                        make_tensor(out.get(), DType::BF16, {rows, kHq, kD}));
    };
    out.poison();
    call(good);
    sync();
    const std::vector<uint8_t> expected = out.download();
    out.poison();
    call(bad);
    sync();
    const std::vector<uint8_t> got = out.download();
    const size_t row_bytes = size_t(kHq) * kD * 2;
    // Requests 0-2 (rows 0-6) as in the clean run; request 3's rows (7-9) and the spare rows untouched.
    CHECK(std::equal(got.begin(), got.begin() + 7 * row_bytes, expected.begin()));
    CHECK(std::all_of(got.begin() + 7 * row_bytes, got.end(), [](uint8_t b) { return b == 0xFF; }));
    named_next_then_clean(rt, [&] { call(good); },
                          fmt::format("cum_seq_lens_q[4]={} is not allowed: allowed 7 to 10 (request 3's", last));
  }
}

TEST_CASE("cuDNN: actual_seq_lens_kv past max_sequence_kv is clamped and named by the next call",
          "[gpu][table_check]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  Decode d(kLens, KVLayout::HND, 33);
  const DeviceBuffer bad = lens_with_bad(1001);
  auto call = [&](const DeviceBuffer& lens) {
    CudnnDecodeArgs a = cudnn_args(d);  // max_sequence_kv 1000, kLens' longest
    a.actual_seq_lens_kv = lens.as<int32_t>();
    d.cudnn(rt, a);
  };
  d.out.poison();
  call(bad);
  sync();
  d.check_outputs(-1);  // request 2 clamped to 1000 rows: its true length, so even its output is right
  named_next_then_clean(
      rt, [&] { call(d.lens); },
      fmt::format("actual_seq_lens_kv[{}]=1001 is not allowed: allowed 0 to max_sequence_kv=1000", kBad));
}

TEST_CASE("cuDNN: a batch offset outside q or out, or off its 16-byte step, voids that request and is named next",
          "[gpu][table_check]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const int64_t row = int64_t(kHq) * kD;
  // Two batch sizes (the planner may split one and not the other: then both writers of out, the decode
  // kernel and the merge kernel, meet the bad offset).
  for (const std::vector<int32_t>& lens : {kLens, std::vector<int32_t>(64, 700)}) {
    const int64_t batch = static_cast<int64_t>(lens.size()), most = (batch - 1) * row;
    std::vector<int32_t> good(batch + 1);  // cuDNN's cumulative form: request b's row at b * H * D
    for (int64_t b = 0; b <= batch; ++b) good[b] = static_cast<int32_t>(b * row);
    const struct {
      bool on_out;
      int64_t value;
    } cases[] = {{false, batch * row}, {true, -8}, {true, row + 4}};
    for (const auto& c : cases) {
      const std::string expect = fmt::format("{}[{}]={} is not allowed: allowed 0 to {} in steps of 8",
                                             c.on_out ? "batch_offsets_o" : "batch_offsets_q", kBad, c.value, most);
      INFO(expect);
      Decode d(lens, KVLayout::HND, 35);
      std::vector<int32_t> bad = good;
      bad[kBad] = static_cast<int32_t>(c.value);
      const DeviceBuffer dgood = upload_ints(good), dbad = upload_ints(bad);
      auto call = [&](const DeviceBuffer& q_offsets, const DeviceBuffer& o_offsets) {
        CudnnDecodeArgs a = cudnn_args(d);
        a.max_sequence_kv = d.host.max_pages * kPage;  // what the block table holds per request
        a.batch_offsets_q = q_offsets.as<int32_t>();
        a.batch_offsets_o = o_offsets.as<int32_t>();
        d.cudnn(rt, a);
      };
      d.out.poison();
      call(c.on_out ? dgood : dbad, c.on_out ? dbad : dgood);
      sync();
      d.check_outputs(kBad);
      const auto out = d.out.download();
      const size_t bytes = size_t(row) * 2;
      CHECK(std::all_of(out.begin() + kBad * bytes, out.begin() + (kBad + 1) * bytes,
                        [](uint8_t b) { return b == 0xFF; }));  // the voided request's row: not written
      named_next_then_clean(rt, [&] { call(dgood, dgood); }, expect);
      d.check_outputs(-1);
    }
  }
}

TEST_CASE("FlashInfer wrapper in CUDA-graph mode: indices overwritten before a replay are named by check() and plan()",
          "[gpu][table_check][graph]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  constexpr int kMaxBatch = 4, kMaxPages = 256;
  Decode d(kLens, KVLayout::NHD, 34);
  DeviceBuffer indptr(4 * (kMaxBatch + 1)), indices(4 * kMaxPages), last(4 * kMaxBatch);
  BatchDecodeWithPagedKVCacheWrapper w(rt, d.ws.get(), d.ws.bytes(), KVLayout::NHD, true, true,
                                       static_cast<int32_t*>(indptr.get()), static_cast<int32_t*>(indices.get()),
                                       static_cast<int32_t*>(last.get()), kMaxBatch, kMaxPages);
  BatchDecodeWithPagedKVCacheWrapper::PlanArgs a;
  a.num_qo_heads = kHq;
  a.num_kv_heads = kHk;
  a.head_dim = kD;
  a.page_size = kPage;
  a.q_data_type = DType::BF16;
  CUstream stream;
  ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  w.plan(d.host.indptr, d.host.indices, d.host.last, a, stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  const CapturedGraph graph(
      stream, [&] { w.run(d.q_view(), d.cache_view(d.k), d.cache_view(d.v), d.out_view(), nullptr, {}, {}, stream); });

  // The caller writes a page id past the cache into the fixed buffer, then replays.
  const int entry = d.host.indptr[kBad] + 3;
  const int32_t bad_id = d.host.num_pages + 50;
  auto spoil = [&](int32_t id) {
    ATTNJIT_CU(cu.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(indices.get()) + 4 * entry, &id, 4));
  };
  spoil(bad_id);
  d.out.poison();
  graph.launch(stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  d.check_outputs(kBad);
  CHECK_THAT(error_of([&] { w.check(); }, Status::InvalidArgument),
             Contains(fmt::format("indices[{}]={} is not allowed: the cache has {} pages", entry, bad_id,
                                  d.host.num_pages)));
  CHECK_NOTHROW(w.check());

  // A negative id this time, found by the next plan(); the plan after it is clean and the replay right.
  spoil(-7);
  graph.launch(stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  CHECK_THAT(error_of([&] { w.plan(d.host.indptr, d.host.indices, d.host.last, a, stream); }, Status::InvalidArgument),
             Contains(fmt::format("indices[{}]=-7 is not allowed", entry)));
  w.plan(d.host.indptr, d.host.indices, d.host.last, a, stream);  // copies the good table into the fixed buffers
  d.out.poison();
  graph.launch(stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  d.check_outputs(-1);
  CHECK_NOTHROW(w.check());

  // An indptr entry past the fixed indices buffer: that request reads as empty, the others stay right.
  const int32_t past = kMaxPages + 9;
  ATTNJIT_CU(cu.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(indptr.get()) + 4 * (kBad + 1), &past, 4));
  d.out.poison();
  graph.launch(stream);
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  for (int r : {0, 1}) {  // request 3 starts at the spoiled entry
    INFO("request " << r);
    CHECK(d.error(r) <= 1e-2);
  }
  CHECK_THAT(error_of([&] { w.run(d.q_view(), d.cache_view(d.k), d.cache_view(d.v), d.out_view(), nullptr, {}, {}, stream); },
                      Status::InvalidArgument),
             Contains(fmt::format("indptr[{}]={} is not allowed: allowed ", kBad + 1, past)));
  cu.StreamDestroy(stream);
}

TEST_CASE("paged prefill in CUDA-graph mode: a page id overwritten in the fixed buffer is named by the next run",
          "[gpu][table_check][graph]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  Decode d(kLens, KVLayout::NHD, 35);  // its cache and page table; the queries are new
  const std::vector<int32_t> qo_lens = {17, 1, 64, 5};
  std::vector<int32_t> qo_indptr{0};
  for (int32_t n : qo_lens) qo_indptr.push_back(qo_indptr.back() + n);
  const int64_t rows = qo_indptr.back();
  DeviceBuffer dq(rows * kHq * kD * 2), out(rows * kHq * kD * 2), clean(rows * kHq * kD * 2);
  {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    std::vector<float> qf(size_t(rows) * kHq * kD);
    for (auto& x : qf) x = uni(rng);
    std::vector<uint8_t> qb;
    encode(DType::BF16, qf, qb);
    dq.upload(qb);
  }
  DeviceBuffer qo_buf(4 * 5), kv_buf(4 * 5), ids_buf(4 * 256), last_buf(4 * 4);
  BatchPrefillCudaGraphBuffers g;
  g.max_batch_size = 4;
  g.qo_indptr = static_cast<int32_t*>(qo_buf.get());
  g.kv_indptr = static_cast<int32_t*>(kv_buf.get());
  g.paged_kv_indices = static_cast<int32_t*>(ids_buf.get());
  g.max_num_pages = 256;
  g.paged_kv_last_page_len = static_cast<int32_t*>(last_buf.get());
  BatchPrefillWithPagedKVCacheWrapper w(rt, d.ws.get(), d.ws.bytes(), g, KVLayout::NHD);
  BatchPrefillPlanOptions o;
  o.causal = true;
  o.q_data_type = DType::BF16;
  w.plan(qo_indptr, d.host.indptr, d.host.indices, d.host.last, kHq, kHk, kD, kPage, o, nullptr);
  const TensorView tq = make_tensor(dq.get(), DType::BF16, {rows, kHq, kD});
  auto run = [&](const DeviceBuffer& to) {
    w.run(tq, d.cache_view(d.k), d.cache_view(d.v), make_tensor(to.get(), DType::BF16, {rows, kHq, kD}), nullptr, nullptr);
  };
  run(clean);
  sync();
  const int entry = d.host.indptr[kBad] + 60;  // request 2's last page but three
  const int32_t bad_id = d.host.num_pages + 5;
  ATTNJIT_CU(cu.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(ids_buf.get()) + 4 * entry, &bad_id, 4));
  out.poison();
  run(out);
  sync();
  // The other requests' rows: bit for bit the clean run's.
  const auto want = clean.download(), got = out.download();
  const size_t row_bytes = size_t(kHq) * kD * 2;
  for (int r = 0; r < 4; ++r)
    if (r != kBad) {
      INFO("request " << r);
      CHECK(std::equal(got.begin() + qo_indptr[r] * row_bytes, got.begin() + qo_indptr[r + 1] * row_bytes,
                       want.begin() + qo_indptr[r] * row_bytes));
    }
  CHECK_THAT(error_of([&] { run(out); }, Status::InvalidArgument),
             Contains(fmt::format("paged_kv_indices[{}]={} is not allowed: the cache has {} pages", entry, bad_id,
                                  d.host.num_pages)));
  w.plan(qo_indptr, d.host.indptr, d.host.indices, d.host.last, kHq, kHk, kD, kPage, o, nullptr);  // the good table again
  run(out);
  sync();
  CHECK(out.download() == want);
  CHECK_NOTHROW(w.check());
}

TEST_CASE("append_paged_kv_cache: a page id past the cache skips that request's rows and is named by the next call",
          "[gpu][table_check][page]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  constexpr int kPages = 12, kHeads = 2, kDim = 64;
  // Two requests of 2 pages each (rows 0..19 and 0..31), appending their last 3 rows.
  const std::vector<int32_t> kv_indptr = {0, 2, 4}, last = {4, 16}, good_ids = {5, 1, 9, 3};
  const std::vector<int32_t> batch_indices = {0, 0, 0, 1, 1, 1}, positions = {17, 18, 19, 29, 30, 31};
  std::vector<int32_t> bad_ids = good_ids;
  bad_ids[3] = kPages + 4;  // request 1's second page
  const int64_t nnz = 6, page_elems = int64_t(kPage) * kHeads * kDim;
  DeviceBuffer ak(nnz * kHeads * kDim * 2), av(nnz * kHeads * kDim * 2), kc(kPages * page_elems * 2),
      vc(kPages * page_elems * 2);
  std::vector<uint8_t> rows(ak.bytes());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint8_t(i * 7 + 3);
  ak.upload(rows);
  av.upload(rows);
  const DeviceBuffer d_bi = upload_ints(batch_indices), d_pos = upload_ints(positions), d_good = upload_ints(good_ids),
                     d_bad = upload_ints(bad_ids), d_indptr = upload_ints(kv_indptr), d_last = upload_ints(last);
  auto call = [&](const DeviceBuffer& ids) {
    PagedKVAppendTable t;
    t.batch_indices = static_cast<const int32_t*>(d_bi.get());
    t.positions = static_cast<const int32_t*>(d_pos.get());
    t.kv_indices = static_cast<const int32_t*>(ids.get());
    t.num_indices = 4;
    t.kv_indptr = static_cast<const int32_t*>(d_indptr.get());
    t.kv_last_page_len = static_cast<const int32_t*>(d_last.get());
    t.batch_size = 2;
    const auto tk = make_tensor(ak.get(), DType::BF16, {nnz, kHeads, kDim});
    const auto tv = make_tensor(av.get(), DType::BF16, {nnz, kHeads, kDim});
    append_paged_kv_cache(rt, tk, tv, t, make_tensor(kc.get(), DType::BF16, {kPages, kPage, kHeads, kDim}),
                          make_tensor(vc.get(), DType::BF16, {kPages, kPage, kHeads, kDim}), KVLayout::NHD, nullptr);
  };
  const std::vector<uint8_t> zeros(kc.bytes(), 0);
  kc.upload(zeros);
  call(d_bad);
  sync();
  // Request 0's rows (page 1 of its table: id 1, slots 1..3) are written; request 1's (page id 14) nowhere.
  const auto k = kc.download();
  const size_t row_bytes = size_t(kHeads) * kDim * 2;
  for (int i = 0; i < 3; ++i) {
    const size_t at = (size_t(1) * kPage + 1 + i) * row_bytes;
    CHECK(std::equal(k.begin() + at, k.begin() + at + row_bytes, rows.begin() + i * row_bytes));
  }
  size_t written = 0;
  for (uint8_t x : k) written += x != 0;
  size_t expected = 0;
  for (size_t i = 0; i < 3 * row_bytes; ++i) expected += rows[i] != 0;
  CHECK(written == expected);
  CHECK_THAT(error_of([&] { call(d_good); }, Status::InvalidArgument),
             Contains(fmt::format("kv_indices[3]={} is not allowed: the cache has {} pages", kPages + 4, kPages)));
  CHECK_NOTHROW(call(d_good));
  sync();
  CHECK_NOTHROW(rt.check(0));
}

TEST_CASE("ATTNJIT_CHECK=1: the call that met a bad table entry raises it itself", "[gpu][table_check]") {
  ATTNJIT_REQUIRE_GPU();
  Config config = Config::from_env();
  config.check_every_run = true;
  Runtime rt(config);
  cuda::ScopedDevice scope(0);
  Decode d(kLens, KVLayout::HND, 36);
  std::vector<int32_t> bad_table = d.host.table;
  bad_table[size_t(kBad) * d.host.max_pages] = -1;
  const DeviceBuffer bad = upload_ints(bad_table);
  auto call = [&](const DeviceBuffer& table) {
    TrtllmDecodeArgs a = trtllm_args(d);
    a.block_tables = table.as<int32_t>();
    d.trtllm(rt, a);
  };
  CHECK_THAT(error_of([&] { call(bad); }, Status::InvalidArgument),
             Contains(fmt::format("block_tables[{}][0]=-1 is not allowed", kBad)));
  CHECK_THAT(error_of([&] { call(bad); }, Status::InvalidArgument), Contains("found by this call: ATTNJIT_CHECK=1"));
  CHECK_NOTHROW(call(d.table));
  d.check_outputs(-1);
}

}  // namespace attnjit::test

// TensorRT-LLM batch decode through the C API's _v3 entry on the GPU, against
// the double-precision reference (token_reference.hpp): q_len_per_req and
// per-request query lengths (max_q_len + cum_seq_lens_q) passed as C
// arguments, and bmm1_scale / bmm2_scale as device float32 tensors -- the
// same bits as the float scales on the CUDA-core path (one token,
// use_tensor_cores 0) and the tensor-core path (use_tensor_cores 1, or
// several tokens), bf16 and fp8 e4m3 KV, split requests (the merge kernel);
// and a CUDA graph captured once that replays with the value the scale
// tensors hold at replay. Output is poisoned first, so a row left unwritten
// fails. Skips without a GPU.
#include "support/trtllm_c_inputs.hpp"  // first: includes dlpack through the compat shim

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_batch_decode.h"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "support/paged_kv_batch.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/token_reference.hpp"

namespace attnjit::test {
namespace {

struct V3Case {
  std::vector<int32_t> kv_lens, q_lens;  // q_lens uniform (q_len_per_req) unless `variable`
  bool variable = false;                 // max_q_len + cum_seq_lens_q
  int hq = 8, hkv = 2, d = 128, page_size = 16;
  DType kv = DType::BF16;
  static constexpr DType q = DType::BF16;  // the query and output
  static constexpr KVLayout layout = KVLayout::HND;
  bool tc = false;         // options.use_tensor_cores
  float bmm1 = 0.6f / std::sqrt(128.f), bmm2 = 0.75f;  // neither the default: a dropped scale shows

  int64_t tokens() const { return std::accumulate(q_lens.begin(), q_lens.end(), int64_t(0)); }
  std::string label() const {
    return fmt::format("kv_lens={} q_lens={}{} {}q/{}kv d={} kv={} tc={} bmm1={} bmm2={}", kv_lens, q_lens,
                       variable ? " (cum_seq_lens_q)" : "", hq, hkv, d, to_string(kv), tc, bmm1, bmm2);
  }
};

constexpr double kOTol = 1e-2, kLseTol = 2e-2;  // bf16 query and output

DeviceBuffer upload_float(float x) {
  DeviceBuffer d(4);
  std::vector<uint8_t> bytes(4);
  std::memcpy(bytes.data(), &x, 4);
  d.upload(bytes);
  return d;
}

// After the call, so the message is the call's.
void require_ok(attnjit_status_t status) {
  INFO(attnjit_last_error());
  REQUIRE(status == ATTNJIT_OK);
}

// One case's inputs on the device and the C call over them.
struct V3Inputs {
  V3Case c;
  PagedBatch b;
  DeviceBuffer dq, dk, dv, dout, dlse, ws, table, lens, cum, s1, s2;
  DLTensorMaker q, k, v, out, lse, tables, seq_lens, cum_t, bmm1_t{{}, kF32}, bmm2_t{{1}, kF32};
  attnjit_trtllm_decode_options_t options{};

  V3Inputs(const V3Case& cs, uint32_t seed) : c(cs), b(batch(cs, seed)), q({cs.tokens(), cs.hq, cs.d}, kBF16),
      k(cache_shape(), cs.kv == DType::E4M3 ? kE4M3 : kBF16), v(k), out(q), lse({cs.tokens(), cs.hq}, kF32),
      tables({int64_t(cs.kv_lens.size()), b.max_pages}, kI32), seq_lens({int64_t(cs.kv_lens.size())}, kI32),
      cum_t({int64_t(cs.kv_lens.size()) + 1}, kI32) {
    dq = DeviceBuffer(b.qb.size());
    dk = DeviceBuffer(b.kb.size());
    dv = DeviceBuffer(b.vb.size());
    dq.upload(b.qb);
    dk.upload(b.kb);
    dv.upload(b.vb);
    dout = DeviceBuffer(size_t(c.tokens()) * c.hq * c.d * 2);
    dlse = DeviceBuffer(size_t(c.tokens()) * c.hq * 4);
    ws = DeviceBuffer(256 << 20);
    table = upload_ints(b.table);
    lens = upload_ints(c.kv_lens);
    std::vector<int32_t> offsets{0};
    for (int32_t n : c.q_lens) offsets.push_back(offsets.back() + n);
    cum = upload_ints(offsets);
    s1 = upload_float(c.bmm1);
    s2 = upload_float(c.bmm2);
    q.data(dq.get());
    k.data(dk.get());
    v.data(dv.get());
    out.data(dout.get());
    lse.data(dlse.get());
    tables.data(table.get());
    seq_lens.data(lens.get());
    cum_t.data(cum.get());
    bmm1_t.data(s1.get());
    bmm2_t.data(s2.get());
    attnjit_trtllm_decode_options_init(&options);  // HND
    options.use_tensor_cores = c.tc;
    options.bmm1_scale = c.bmm1;
    options.bmm2_scale = c.bmm2;
  }

  static PagedBatch batch(const V3Case& c, uint32_t seed) {
    return make_paged_batch(paged_shape_of(c, c.kv_lens, c.tokens()), seed);
  }
  std::vector<int64_t> cache_shape() const { return {b.num_pages, c.hkv, c.page_size, c.d}; }

  // tensor_scales: pass the scale tensors (the options' floats then set to 3,
  // which must not be used); else the floats.
  attnjit_status_t call(attnjit_runtime_t* rt, bool tensor_scales, CUstream stream = nullptr) {
    attnjit_trtllm_decode_options_t o = options;
    if (tensor_scales) o.bmm1_scale = o.bmm2_scale = 3.f;
    const int64_t max_len = *std::max_element(c.kv_lens.begin(), c.kv_lens.end());
    return attnjit_trtllm_batch_decode_with_kv_cache_v3(
        rt, q.get(), k.get(), v.get(), ws.get(), ws.bytes(), tables.get(), seq_lens.get(), max_len, &o, nullptr, -1,
        c.variable ? 1 : c.q_lens[0], c.variable ? *std::max_element(c.q_lens.begin(), c.q_lens.end()) : 0,
        c.variable ? cum_t.get() : nullptr, tensor_scales ? bmm1_t.get() : nullptr,
        tensor_scales ? bmm2_t.get() : nullptr, out.get(), lse.get(), stream);
  }

  // The call over poisoned outputs, which must succeed, then a sync.
  void run(attnjit_runtime_t* rt, bool tensor_scales) {
    dout.poison();
    dlse.poison();
    require_ok(call(rt, tensor_scales));
    ATTNJIT_CU(cuda::driver().CtxSynchronize());
  }

  TokenErrors errors(float bmm1, float bmm2) const {
    TokenReference ref = token_reference_of(c, c.kv_lens, c.q_lens);
    ref.sm_scale = bmm1;
    ref.v_scale = bmm2;
    return compare_tokens(ref, b, decode(DType::BF16, dout.download()), decode(DType::F32, dlse.download()));
  }
};

void check_errors(const TokenErrors& e) {
  CHECK(e.o_rel <= kOTol);
  CHECK(e.lse_abs <= kLseTol);
}

}  // namespace

TEST_CASE("trtllm _v3 takes q_len_per_req and cum_seq_lens_q through the C API", "[gpu][batch_decode][capi_v3]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  CRuntime h;
  std::vector<V3Case> cases;
  for (DType kv : {DType::BF16, DType::E4M3}) {
    V3Case c;  // q_len_per_req 2, a request long enough to be split
    c.kv_lens = {37, 9000, 21, 513};
    c.q_lens.assign(4, 2);
    c.kv = kv;
    cases.push_back(c);
    V3Case v;  // per-request lengths, one split request
    v.variable = true;
    v.kv_lens = {50, 20000, 17, 300};
    v.q_lens = {1, 4, 2, 3};
    v.kv = kv;
    v.hq = 10;
    v.d = 64;
    v.bmm1 = 0.7f / 8.f;
    cases.push_back(v);
  }
  uint32_t seed = 600;
  for (const auto& c : cases) {
    INFO(c.label());
    V3Inputs in(c, seed++);
    in.run(h.rt, false);
    check_errors(in.errors(c.bmm1, c.bmm2));
  }
}

TEST_CASE("trtllm _v3: device-tensor scales give the float scales' bits on CUDA and tensor cores",
          "[gpu][batch_decode][capi_v3][tensor_scales]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  CRuntime h;
  uint32_t seed = 700;
  for (DType kv : {DType::BF16, DType::E4M3})
    for (bool tc : {false, true})
      for (int q_len : {1, 2}) {  // several tokens run on tensor cores whatever use_tensor_cores says
        V3Case c;
        c.kv_lens = {9000, 5, 300, 64};  // the long one is split: its partial states carry bmm2 into the merge
        c.q_lens.assign(4, q_len);
        c.kv = kv;
        c.tc = tc;
        c.hq = 16;
        c.hkv = 4;
        INFO(c.label());
        V3Inputs in(c, seed++);
        in.run(h.rt, false);
        const auto out_float = in.dout.download(), lse_float = in.dlse.download();
        check_errors(in.errors(c.bmm1, c.bmm2));
        in.run(h.rt, true);
        check_errors(in.errors(c.bmm1, c.bmm2));
        CHECK(in.dout.download() == out_float);
        CHECK(in.dlse.download() == lse_float);
      }
}

TEST_CASE("trtllm _v3 in a CUDA graph replays with the scale tensors' values at replay",
          "[gpu][batch_decode][capi_v3][tensor_scales][graph]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  CRuntime h;
  const auto& cu = cuda::driver();
  for (int q_len : {1, 2}) {
    V3Case c;
    c.kv_lens = {9000, 5, 300};
    c.q_lens.assign(3, q_len);
    INFO(c.label());
    V3Inputs in(c, 800 + q_len);
    CUstream stream;
    ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    require_ok(in.call(h.rt, true, stream));  // outside capture: the kernels load, the plan is memoized
    ATTNJIT_CU(cu.StreamSynchronize(stream));
    ATTNJIT_CU(cu.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    const attnjit_status_t captured = in.call(h.rt, true, stream);
    CUgraph graph;
    ATTNJIT_CU(cu.StreamEndCapture(stream, &graph));
    require_ok(captured);
    CUgraphExec exec;
    ATTNJIT_CU(cu.GraphInstantiate(&exec, graph, 0));
    for (auto [s1, s2] : {std::pair{c.bmm1, c.bmm2}, std::pair{0.3f / std::sqrt(128.f), 0.25f},
                          std::pair{1.6f / std::sqrt(128.f), 3.f}}) {
      INFO(fmt::format("replay with bmm1={} bmm2={}", s1, s2));
      // In place, on the stream: the graph reads these addresses.
      std::vector<uint8_t> b1(4), b2(4);
      std::memcpy(b1.data(), &s1, 4);
      std::memcpy(b2.data(), &s2, 4);
      ATTNJIT_CU(cu.MemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(in.bmm1_t.get()->data), b1.data(), 4, stream));
      ATTNJIT_CU(cu.MemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(in.bmm2_t.get()->data), b2.data(), 4, stream));
      in.dout.poison();
      in.dlse.poison();
      ATTNJIT_CU(cu.CtxSynchronize());  // the poison's copies ran on the legacy stream, which `stream` does not wait for
      ATTNJIT_CU(cu.GraphLaunch(exec, stream));
      ATTNJIT_CU(cu.StreamSynchronize(stream));
      check_errors(in.errors(s1, s2));
    }
    cu.GraphExecDestroy(exec);
    cu.GraphDestroy(graph);
    cu.StreamDestroy(stream);
  }
}

}  // namespace attnjit::test

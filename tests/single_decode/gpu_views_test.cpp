// single_decode_with_kv_cache on views a serving engine hands over, on the
// GPU against the double-precision reference: K and V as strided views of a
// wider buffer (rows warmed in L2 before the PDL wait, kernels/decode_prefetch.cuh,
// must land on the view's rows), views too misaligned for the kernel's
// 16-byte loads (refused by name, not a fault), and calls chained on one
// stream, each reading the previous call's output as its query, so a launch
// that read its input before the kernel before had written it shows.
// Skips without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnjit/attnjit.hpp"
#include "support/device_buffer.hpp"
#include "support/gpu_support.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "reference/decode_grid.hpp"
#include "reference/decode_reference.hpp"
#include "reference/host_dtypes.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {
namespace {

// [N, Hk, D] rows copied into a buffer whose head rows are `pitch` elements
// apart (pitch >= D), and the NHD view of the first D elements of each.
struct PaddedKV {
  DeviceBuffer buffer;
  TensorView view;
};
PaddedKV padded(const std::vector<uint8_t>& dense, DType dtype, int64_t N, int64_t Hk, int64_t D, int64_t pitch) {
  const size_t es = dtype_size(dtype);
  std::vector<uint8_t> bytes(size_t(N * Hk * pitch) * es, 0x7F);  // padding: large finite values, never read
  for (int64_t r = 0; r < N * Hk; ++r) std::memcpy(&bytes[size_t(r * pitch) * es], &dense[size_t(r * D) * es], D * es);
  PaddedKV kv{DeviceBuffer(bytes.size()), {}};
  kv.buffer.upload(bytes);
  kv.view.data = kv.buffer.get();
  kv.view.dtype = dtype;
  kv.view.ndim = 3;
  kv.view.shape = {N, Hk, D, 0};
  kv.view.strides = {Hk * pitch, pitch, 1, 0};
  return kv;
}


}  // namespace

TEST_CASE("single decode reads strided K/V views and refuses misaligned ones by name", "[gpu][decode][views]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  // Group 4 runs on tensor cores, group 1 on CUDA cores; 3001 rows are split
  // and merged, in chunks that are no multiple of a tile; 16 extra elements
  // per head row keep the rows 16-byte aligned for both K/V types.
  for (DType kv : {DType::BF16, DType::E4M3})
    for (int hkv : {8, 32}) {
      const SingleDecodeProblem p = d128_decode_problem(32, hkv, 3001, kv);
      const int64_t H = p.num_qo_heads, Hk = hkv, D = p.head_dim, N = p.kv_len;
      INFO(fmt::format("{} {}q/{}kv n={}", to_string(kv), H, Hk, N));
      std::mt19937 rng(40 + hkv);
      std::vector<uint8_t> qb, kb, vb;
      const auto q = encode(p.q_dtype, random_values(rng, H * D, 2.f), qb);
      const auto k = encode(kv, random_values(rng, N * Hk * D, 2.f), kb);
      const auto v = encode(kv, random_values(rng, N * Hk * D, 1.f), vb);
      DeviceBuffer dq(qb.size()), dout(H * D * 2), dlse(H * 4);
      dq.upload(qb);
      dout.poison();
      dlse.poison();
      SingleDecodePlan plan(rt, p);
      REQUIRE(plan.num_splits() > 1);
      DeviceBuffer ws(plan.workspace_bytes());
      const auto tq = make_tensor(dq.get(), p.q_dtype, {H, D});
      const auto to = make_tensor(dout.get(), p.q_dtype, {H, D});
      const auto tl = make_tensor(dlse.get(), DType::F32, {H});
      PaddedKV pk = padded(kb, kv, N, Hk, D, D + 16), pv = padded(vb, kv, N, Hk, D, D + 16);
      plan.run(tq, pk.view, pv.view, to, &tl, ws.get(), ws.bytes(), nullptr);
      ATTNJIT_CU(cuda::driver().CtxSynchronize());
      const auto ref = reference_single_decode(p, q, k, v);
      CHECK(relative_l2(decode(p.q_dtype, dout.download()), ref.o) <= 1e-2);
      const auto lse = decode(DType::F32, dlse.download());
      double lse_err = 0;
      for (int64_t h = 0; h < H; ++h) lse_err = std::max(lse_err, std::fabs(lse[h] - ref.lse[h]));
      CHECK(lse_err <= 2e-2);

      // 8 extra elements: an fp8 row starts 8 bytes off a 16-byte boundary.
      // The tensor-core kernel loads 16 bytes per thread, so it must refuse
      // the view; the CUDA-core kernel loads 8 elements and takes it.
      if (kv == DType::E4M3) {
        PaddedKV mk = padded(kb, kv, N, Hk, D, D + 8);
        const bool tc = ops::plan_single_decode(p, {}).decode.spec.as<DecodeKernel>()->tensor_cores;
        if (tc) {
          CHECK_THROWS_WITH(plan.run(tq, mk.view, pv.view, to, &tl, ws.get(), ws.bytes(), nullptr),
                            Catch::Contains("k:") && Catch::Contains("multiple of 16 bytes"));
        } else {
          dout.poison();
          PaddedKV mv = padded(vb, kv, N, Hk, D, D + 8);
          plan.run(tq, mk.view, mv.view, to, &tl, ws.get(), ws.bytes(), nullptr);
          ATTNJIT_CU(cuda::driver().CtxSynchronize());
          CHECK(relative_l2(decode(p.q_dtype, dout.download()), ref.o) <= 1e-2);
        }
      }
    }
}

TEST_CASE("single decode calls chained on one stream see the previous call's output", "[gpu][decode][pdl]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  // Split (decode, then merge), both launched with programmatic dependent
  // launch on sm_90: each call's decode CTAs start, and warm their first rows
  // in L2, while the call before still merges; its query is that merge's output.
  for (DType kv : {DType::BF16, DType::E4M3}) {
    const SingleDecodeProblem p = d128_decode_problem(32, 8, 20000, kv);
    const int64_t H = p.num_qo_heads, Hk = p.num_kv_heads, D = p.head_dim, N = p.kv_len;
    constexpr int kCalls = 4;
    INFO(to_string(kv));
    std::mt19937 rng(kv == DType::BF16 ? 5 : 6);
    std::vector<uint8_t> qb;
    const auto q0 = encode(p.q_dtype, random_values(rng, H * D, 2.f), qb);
    std::vector<std::vector<double>> k(2), v(2);
    std::vector<DeviceBuffer> dk, dv;
    for (int s = 0; s < 2; ++s) {  // two K/V sets, alternating, so no call finds the last one's rows in L2
      std::vector<uint8_t> kb, vb;
      k[s] = encode(kv, random_values(rng, N * Hk * D, 2.f), kb);
      v[s] = encode(kv, random_values(rng, N * Hk * D, 8.f), vb);  // outputs large enough to serve as queries
      dk.emplace_back(kb.size());
      dv.emplace_back(vb.size());
      dk.back().upload(kb);
      dv.back().upload(vb);
    }
    DeviceBuffer dq(qb.size());
    dq.upload(qb);
    std::vector<DeviceBuffer> outs;
    for (int i = 0; i < kCalls; ++i) {
      outs.emplace_back(H * D * 2);
      outs.back().poison();
    }
    SingleDecodePlan plan(rt, p);
    REQUIRE(plan.num_splits() > 1);
    DeviceBuffer ws(plan.workspace_bytes());
    CUstream stream;
    ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < kCalls; ++i) {
      const auto tq = make_tensor(i == 0 ? dq.get() : outs[i - 1].get(), p.q_dtype, {H, D});
      plan.run(tq, make_tensor(dk[i % 2].get(), kv, {N, Hk, D}), make_tensor(dv[i % 2].get(), kv, {N, Hk, D}),
               make_tensor(outs[i].get(), p.q_dtype, {H, D}), nullptr, ws.get(), ws.bytes(), reinterpret_cast<Stream>(stream));
    }
    ATTNJIT_CU(cu.StreamSynchronize(stream));
    cu.StreamDestroy(stream);
    std::vector<double> q = q0;
    for (int i = 0; i < kCalls; ++i) {
      const auto out = decode(p.q_dtype, outs[i].download());
      const auto ref = reference_single_decode(p, q, k[i % 2], v[i % 2]);
      CHECK(relative_l2(out, ref.o) <= 1e-2);
      q = out;  // the next call's query, as the GPU wrote it
    }
  }
}

}  // namespace attnjit::test

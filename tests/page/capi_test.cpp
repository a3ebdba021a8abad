// attnjit_page.h without a GPU: every refusal of append_paged_kv_cache and
// get_batch_indices_positions reached through the C functions, each naming
// the argument, its value and what is allowed: a NULL runtime, the layout,
// index arrays that are not int32 (FlashInfer's requirement), on the host,
// of the wrong length or device, and the C++ checks behind them (dtypes,
// shapes). Every call fails in validation, before a kernel would be loaded.
#include "support/dltensor_maker.hpp"  // first: includes dlpack through the compat shim
#include "support/c_runtime.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_page.h"

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
namespace t = attnjit::test;

namespace {

// A valid append of 10 rows (8 heads x 128, bfloat16) for 4 requests into a
// 40-page NHD cache of page size 16: valid until spoiled.
struct AppendArgs {
  t::DLTensorMaker k{{10, 8, 128}, t::kBF16}, v{{10, 8, 128}, t::kBF16};
  t::DLTensorMaker kc{{40, 16, 8, 128}, t::kBF16}, vc{{40, 16, 8, 128}, t::kBF16};
  t::DLTensorMaker batch_indices{{10}, t::kI32}, positions{{10}, t::kI32}, kv_indices{{12}, t::kI32},
      kv_indptr{{5}, t::kI32}, last{{4}, t::kI32};
  int32_t layout = ATTNJIT_KV_LAYOUT_NHD;
  bool five_d = false;
  t::DLTensorMaker cache5{{40, 2, 16, 8, 128}, t::kBF16};
  attnjit_status_t call(attnjit_runtime_t* rt) {
    return attnjit_append_paged_kv_cache(rt, k.get(), v.get(), batch_indices.get(), positions.get(),
                                         five_d ? cache5.get() : kc.get(), five_d ? nullptr : vc.get(),
                                         kv_indices.get(), kv_indptr.get(), last.get(), layout, nullptr);
  }
};

struct PositionsArgs {
  t::DLTensorMaker indptr{{5}, t::kI32}, seq_lens{{4}, t::kI32}, batch_indices{{100}, t::kI32},
      positions{{100}, t::kI32};
  int64_t nnz = 100;
  attnjit_status_t call(attnjit_runtime_t* rt) {
    return attnjit_get_batch_indices_positions(rt, indptr.get(), seq_lens.get(), nnz, batch_indices.get(),
                                               positions.get(), nullptr);
  }
};

}  // namespace

TEST_CASE("attnjit_append_paged_kv_cache refuses bad arguments by name", "[capi][page]") {
  t::CRuntime h;
  AppendArgs a;
  t::expect_refused(a.call(nullptr), Contains("attnjit_append_paged_kv_cache: rt is NULL"));
  SECTION("layout") {
    a.layout = 2;
    t::expect_refused(a.call(h.rt), Equals("kv_layout=2 is not a layout; allowed: 0 (NHD), 1 (HND)"));
  }
  SECTION("index arrays are int32") {
    a.batch_indices.dtype(t::kI64);
    t::expect_refused(a.call(h.rt),
                      Contains("batch_indices: dtype (code=0 kDLInt, bits=64, lanes=1) is not allowed; allowed: int32 "
                               "(kDLInt, 32)"));
    a.batch_indices.dtype(t::kI32);
    a.kv_indptr.dtype(t::kI64);
    t::expect_refused(a.call(h.rt), Contains("kv_indptr: dtype (code=0 kDLInt, bits=64"));
  }
  SECTION("index arrays live on the append's device") {
    a.positions.device({kDLCPU, 0});
    t::expect_refused(a.call(h.rt), Contains("positions: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA"));
    a.positions.device({kDLCUDA, 1});
    t::expect_refused(
        a.call(h.rt),
        Equals("positions: device cuda:1 differs from append_key's device cuda:0; they must be equal"));
  }
  SECTION("index array lengths") {
    a.positions = t::DLTensorMaker({9}, t::kI32);
    t::expect_refused(a.call(h.rt),
                      Equals("positions: shape [9] is not allowed; allowed: [nnz] with nnz=10 from append_key"));
    a.positions = t::DLTensorMaker({10}, t::kI32);
    a.kv_indptr = t::DLTensorMaker({4}, t::kI32);
    t::expect_refused(a.call(h.rt),
                      Equals("kv_indptr: shape [4] is not allowed; allowed: [batch_size + 1] with batch_size + 1=5 "
                             "from kv_last_page_len"));
    a.kv_indptr = t::DLTensorMaker({5}, t::kI32);
    a.kv_indices = t::DLTensorMaker({3, 4}, t::kI32);
    t::expect_refused(a.call(h.rt), Equals("kv_indices: shape [3, 4] is not allowed; allowed: 1-D [num_indices]"));
    a.kv_indices = t::DLTensorMaker({12}, t::kI32).strides({2});
    t::expect_refused(a.call(h.rt),
                      Contains("kv_indices: strides [2] are not allowed for shape [12]; allowed: contiguous"));
  }
  SECTION("the C++ checks behind: dtypes and shapes") {
    a.kc.dtype(t::kE4M3);
    t::expect_refused(a.call(h.rt), Contains("k_cache: dtype float8_e4m3fn differs from append_key's dtype bfloat16"));
    a.kc.dtype(t::kBF16);
    a.layout = ATTNJIT_KV_LAYOUT_HND;
    t::expect_refused(a.call(h.rt), Contains("k_cache: shape [40, 16, 8, 128] has num_kv_heads (shape[1])=16"));
    a.layout = ATTNJIT_KV_LAYOUT_NHD;
    a.k = t::DLTensorMaker({10, 8, 128}, t::kF32);
    a.v = t::DLTensorMaker({10, 8, 128}, t::kF32);
    t::expect_refused(a.call(h.rt), Contains("append_key: dtype float32 is not supported"));
    a.k = t::DLTensorMaker({10, 1024}, t::kBF16);
    t::expect_refused(a.call(h.rt),
                      Contains("append_key: ndim=2 is not allowed; allowed: 3, [nnz, num_kv_heads, head_dim]"));
  }
  SECTION("the 5-D cache with v_cache NULL is split into its halves") {
    a.five_d = true;
    a.kv_indptr.dtype(t::kI64);  // the cache passes; the next argument is refused
    t::expect_refused(a.call(h.rt), Contains("kv_indptr: dtype (code=0 kDLInt, bits=64"));
    a.kv_indptr.dtype(t::kI32);
    a.cache5 = t::DLTensorMaker({40, 3, 16, 8, 128}, t::kBF16);
    t::expect_refused(a.call(h.rt), Contains("kv_cache: shape [40, 3, 16, 8, 128] is not allowed; shape[1] must be 2"));
  }
}

TEST_CASE("attnjit_get_batch_indices_positions refuses bad arguments by name", "[capi][page]") {
  t::CRuntime h;
  PositionsArgs a;
  t::expect_refused(a.call(nullptr), Contains("attnjit_get_batch_indices_positions: rt is NULL"));
  a.nnz = -1;
  t::expect_refused(a.call(h.rt), Equals("nnz=-1 is not allowed; allowed: 0 to 2147483647 (int32 outputs)"));
  a.nnz = 100;
  a.seq_lens.dtype(t::kI64);
  t::expect_refused(a.call(h.rt),
                    Contains("seq_lens: dtype (code=0 kDLInt, bits=64, lanes=1) is not allowed; allowed: int32"));
  a.seq_lens = t::DLTensorMaker({3}, t::kI32);
  t::expect_refused(a.call(h.rt),
                    Equals("seq_lens: shape [3] is not allowed; allowed: [batch_size] with batch_size=4 from "
                           "append_indptr's batch_size + 1 entries"));
  a.seq_lens = t::DLTensorMaker({4}, t::kI32);
  a.indptr = t::DLTensorMaker({0}, t::kI32);
  t::expect_refused(a.call(h.rt), Contains("append_indptr: shape [0] is not allowed; allowed: [batch_size + 1]"));
  a.indptr = t::DLTensorMaker({5}, t::kI32);
  a.positions = t::DLTensorMaker({99}, t::kI32);
  t::expect_refused(
      a.call(h.rt),
      Equals("positions: shape [99] is not allowed; allowed: [nnz] with nnz=100 from the nnz argument"));
  a.positions = t::DLTensorMaker({100}, t::kI32);
  a.batch_indices.device({kDLCUDA, 2});
  t::expect_refused(a.call(h.rt), Contains("batch_indices: device cuda:2 differs from append_indptr's device cuda:0"));
}

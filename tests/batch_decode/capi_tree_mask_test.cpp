// attnjit_trtllm_batch_decode_with_kv_cache_v4 without a GPU: TensorRT-LLM's
// draft-tree `mask` (uint16 rows, FlashInfer's layout) refused by name when
// its shape, dtype, layout or device disagree, and the single-tensor cache
// [pages, 1, ...] taken there (K and V one tensor) but not by the wrapper's
// run, which never took it. Accepted arguments reach the C++ checks behind
// the C layer; nothing is dereferenced (made-up device pointers).
#include "support/trtllm_c_inputs.hpp"  // first: includes dlpack through the compat shim

#include <catch2/catch.hpp>

#include <string>

using Catch::Matchers::Contains;
namespace t = attnjit::test;

namespace {

// Past every C check the C++ call refuses max_seq_len=65 (4 pages of 16).
constexpr const char* kPastTheCChecks = "max_seq_len=65 is not allowed; block_tables hold 4 pages of 16 rows";

attnjit_status_t call_v4(attnjit_runtime_t* rt, t::TrtllmInputs& in, int q_len, const DLTensor* mask,
                         DLTensor* v_cache) {
  return attnjit_trtllm_batch_decode_with_kv_cache_v4(
      rt, in.query.get(), in.k.get(), v_cache, t::fake_device_pointer(), 128 << 20, in.tables.get(), in.lens.get(),
      in.max_seq_len, &in.options, nullptr, -1, q_len, 0, nullptr, nullptr, nullptr, mask, in.out.get(), nullptr,
      nullptr);
}

}  // namespace

TEST_CASE("trtllm _v4 takes the draft-tree mask: one uint16 row per query token", "[capi][refused]") {
  t::CRuntime h;
  t::TrtllmInputs in;
  in.max_seq_len = 65;
  in.query = t::DLTensorMaker({6, 8, 128});  // 2 requests of 3 tokens
  in.out = t::DLTensorMaker({6, 8, 128});
  SECTION("[batch, q_len, 2] uint16: through to the C++ checks") {
    t::DLTensorMaker mask({2, 3, 2}, t::kU16);
    t::expect_refused(call_v4(h.rt, in, 3, mask.get(), in.v.get()), Contains(kPastTheCChecks));
  }
  SECTION("a mask without several tokens is refused by the problem") {
    in.query = t::DLTensorMaker({2, 8, 128});
    in.out = t::DLTensorMaker({2, 8, 128});
    in.max_seq_len = 64;
    t::DLTensorMaker mask({2, 1, 2}, t::kU16);
    t::expect_refused(call_v4(h.rt, in, 1, mask.get(), in.v.get()),
                      Contains("draft_mask=true is not allowed with 1 query token per request"));
  }
  SECTION("shape, dtype, layout, device") {
    t::DLTensorMaker rows({2, 2, 2}, t::kU16);
    t::expect_refused(call_v4(h.rt, in, 3, rows.get(), in.v.get()),
                      Contains("mask: shape [2, 2, 2] is not allowed; allowed: [batch_size=2, q_len_per_req=3"));
    t::DLTensorMaker odd({2, 3, 3}, t::kU16);
    t::expect_refused(call_v4(h.rt, in, 3, odd.get(), in.v.get()), Contains("an even number of uint16"));
    t::DLTensorMaker f16({2, 3, 2});
    t::expect_refused(call_v4(h.rt, in, 3, f16.get(), in.v.get()),
                      Contains("mask: dtype (code 2, bits 16) is not allowed; allowed: uint16"));
    t::DLTensorMaker strided({2, 3, 2}, t::kU16);
    strided.strides({12, 4, 1});
    t::expect_refused(call_v4(h.rt, in, 3, strided.get(), in.v.get()), Contains("mask: strides are not allowed"));
    t::DLTensorMaker host({2, 3, 2}, t::kU16);
    host.device({kDLCPU, 0});
    t::expect_refused(call_v4(h.rt, in, 3, host.get(), in.v.get()),
                      Contains("mask: device (type 1, id 0) is not allowed; allowed: the query's, cuda:0"));
    t::DLTensorMaker flat({6, 2}, t::kU16);  // [num_tokens, words]: right row count
    t::expect_refused(call_v4(h.rt, in, 3, flat.get(), in.v.get()), Contains(kPastTheCChecks));
    t::DLTensorMaker short_rows({5, 2}, t::kU16);
    t::expect_refused(call_v4(h.rt, in, 3, short_rows.get(), in.v.get()),
                      Contains("mask: shape [5, 2] has 5 rows; allowed: one per query token row (6)"));
  }
}

TEST_CASE("trtllm takes a single-tensor cache [pages, 1, ...]: K and V one tensor", "[capi][refused]") {
  t::CRuntime h;
  t::TrtllmInputs in;
  in.max_seq_len = 65;
  t::DLTensorMaker one({10, 1, 2, 16, 128});
  CHECK(call_v4(h.rt, in, 1, nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);  // k is 4-D with v NULL
  CHECK_THAT(t::c_last_error(), Contains("kv_cache: ndim=4 is not allowed with v_cache NULL"));
  in.k = std::move(one);
  t::expect_refused(call_v4(h.rt, in, 1, nullptr, nullptr), Contains(kPastTheCChecks));
  t::DLTensorMaker three({10, 3, 2, 16, 128});
  in.k = std::move(three);
  t::expect_refused(call_v4(h.rt, in, 1, nullptr, nullptr),
                    Contains("shape[1] must be 2 (K then V) or 1 (K and V are the same tensor"));
}

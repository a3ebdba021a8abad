// attnjit_trtllm_batch_decode_with_kv_cache_v3 without a GPU: speculative
// decoding's q_len_per_req, max_q_len and cum_seq_lens_q, and the
// device-tensor bmm1_scale / bmm2_scale, each refused with a message naming
// the argument, its value and what is allowed; accepted values reach the C++
// checks behind the C layer. Every call fails in validation before a plan
// would need a device (the made-up tensors are never dereferenced).
#include "support/trtllm_c_inputs.hpp"  // first: includes dlpack through the compat shim

#include <catch2/catch.hpp>

#include <string>
#include <utility>

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
namespace t = attnjit::test;

namespace {

// Past every C check the C++ call refuses max_seq_len=65 (4 pages of 16):
// reaching that error shows the C layer accepted the arguments.
constexpr const char* kPastTheCChecks = "max_seq_len=65 is not allowed; block_tables hold 4 pages of 16 rows";

}  // namespace

TEST_CASE("trtllm _v3 takes q_len_per_req: the query has a row per token", "[capi][speculative]") {
  t::CRuntime h;
  t::TrtllmInputs in;  // block_tables and seq_lens for 2 requests
  in.max_seq_len = 65;
  t::TrtllmInputs::V3 x;
  x.q_len_per_req = 2;

  SECTION("4 rows of 2 tokens: 2 requests, through to the C++ checks") {
    in.query = t::DLTensorMaker({4, 8, 128});
    in.out = t::DLTensorMaker({4, 8, 128});
    t::expect_refused(in.call_v3(h.rt, x), Contains(kPastTheCChecks));
  }
  SECTION("the batch is rows / q_len_per_req, and the tables must match it") {
    // 2 rows of 2 tokens: one request, but block_tables has two.
    t::expect_refused(in.call_v3(h.rt, x),
                      Equals("block_tables: shape [2, 4] is not allowed; allowed: [batch_size, max_pages] "
                             "(batch_size=1 from the query)"));
  }
  SECTION("rows not a multiple of q_len_per_req") {
    in.query = t::DLTensorMaker({3, 8, 128});
    t::expect_refused(
        in.call_v3(h.rt, x),
        Contains("query: 3 token rows is not allowed with q_len_per_req=2; allowed: a multiple of it"));
  }
  SECTION("q_len_per_req 0 and negative") {
    for (int q_len : {0, -3}) {
      x.q_len_per_req = q_len;
      t::expect_refused(in.call_v3(h.rt, x),
                        Equals("q_len_per_req=" + std::to_string(q_len) + " is not allowed; allowed: >= 1 query tokens "
                               "per request"));
    }
  }
  SECTION("q_len_per_req past 64 (prefill's)") {
    x.q_len_per_req = 65;
    in.query = t::DLTensorMaker({130, 8, 128});
    in.max_seq_len = 64;
    t::expect_refused(in.call_v3(h.rt, x), Contains("q_len_per_req=65 is not allowed; allowed: 1 to 64"));
  }
  SECTION("the query's rank names its rows as tokens") {
    in.query = t::DLTensorMaker({4, 1024});
    CHECK(in.call_v3(h.rt, x) == ATTNJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(t::c_last_error(),
               Contains("query: ndim=2 is not allowed; allowed: 3, [num_tokens, num_qo_heads, head_dim]"));
  }
}

TEST_CASE("trtllm _v3 takes max_q_len and cum_seq_lens_q together", "[capi][speculative]") {
  t::CRuntime h;
  t::TrtllmInputs in;  // seq_lens [2]: 2 requests
  in.max_seq_len = 65;
  in.query = t::DLTensorMaker({5, 8, 128});  // 5 tokens in all, at most 2 * max_q_len
  in.out = t::DLTensorMaker({5, 8, 128});
  t::DLTensorMaker cum({3}, t::kI32);
  t::TrtllmInputs::V3 x;
  x.max_q_len = 4;
  x.cum_seq_lens_q = cum.get();

  SECTION("both: through to the C++ checks") {
    t::expect_refused(in.call_v3(h.rt, x), Contains(kPastTheCChecks));
    x.q_len_per_req = 4;  // equal to max_q_len is allowed too
    t::expect_refused(in.call_v3(h.rt, x), Contains(kPastTheCChecks));
  }
  SECTION("max_q_len without cum_seq_lens_q") {
    x.cum_seq_lens_q = nullptr;
    x.max_q_len = 3;
    t::expect_refused(in.call_v3(h.rt, x),
                      Equals("max_q_len=3 is not allowed without cum_seq_lens_q; they go together (cum_seq_lens_q: "
                             "int32 [batch_size + 1] on the device)"));
  }
  SECTION("cum_seq_lens_q without max_q_len, or with a negative one") {
    for (int max_q : {0, -2}) {
      x.max_q_len = max_q;
      CHECK(in.call_v3(h.rt, x) == ATTNJIT_ERROR_INVALID_ARGUMENT);
      CHECK_THAT(t::c_last_error(), Equals("max_q_len=" + std::to_string(max_q) +
                                      " is not allowed with cum_seq_lens_q; they go together (max_q_len: the most "
                                      "query tokens any request has, >= 1)"));
    }
  }
  SECTION("max_q_len past 64, and q_len_per_req other than 1 or max_q_len") {
    in.max_seq_len = 64;
    x.max_q_len = 65;
    t::expect_refused(
        in.call_v3(h.rt, x),
        Contains("max_q_len=65 is not allowed; allowed: 0 (every request has q_len_per_req tokens) or 1 to 64"));
    x.max_q_len = 4;
    x.q_len_per_req = 2;
    t::expect_refused(in.call_v3(h.rt, x), Contains("q_len_per_req=2 is not allowed with max_q_len=4"));
  }
  SECTION("more query rows than batch * max_q_len") {
    in.max_seq_len = 64;
    in.query = t::DLTensorMaker({9, 8, 128});
    in.out = t::DLTensorMaker({9, 8, 128});
    t::expect_refused(in.call_v3(h.rt, x), Contains("9 token rows is not allowed with batch=2 and max_q_len=4"));
  }
  SECTION("the batch is seq_lens' length; block_tables must match it") {
    in.lens = t::DLTensorMaker({3}, t::kI32);
    cum = t::DLTensorMaker({4}, t::kI32);
    x.cum_seq_lens_q = cum.get();
    t::expect_refused(in.call_v3(h.rt, x),
                      Equals("block_tables: shape [2, 4] is not allowed; allowed: [batch_size, max_pages] "
                             "(batch_size=3 from seq_lens' length, with cum_seq_lens_q)"));
  }
  SECTION("cum_seq_lens_q: [batch_size + 1]") {
    cum = t::DLTensorMaker({2}, t::kI32);
    x.cum_seq_lens_q = cum.get();
    t::expect_refused(in.call_v3(h.rt, x),
                      Equals("cum_seq_lens_q: shape [2] is not allowed; allowed: [batch_size + 1] with batch_size + "
                             "1=3 from seq_lens"));
    cum = t::DLTensorMaker({3, 1}, t::kI32);
    x.cum_seq_lens_q = cum.get();
    t::expect_refused(in.call_v3(h.rt, x), Contains("cum_seq_lens_q: shape [3, 1] is not allowed"));
  }
  SECTION("cum_seq_lens_q: int32 on the query's device, contiguous") {
    cum.dtype({kDLInt, 64, 1});
    t::expect_refused(in.call_v3(h.rt, x),
                      Equals("cum_seq_lens_q: dtype (code=0 kDLInt, bits=64, lanes=1) is not allowed; allowed: int32 "
                             "(kDLInt, 32)"));
    cum.dtype(t::kI32).device({kDLCPU, 0});
    t::expect_refused(in.call_v3(h.rt, x),
                      Contains("cum_seq_lens_q: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA"));
    cum.device({kDLCUDA, 1});
    t::expect_refused(
        in.call_v3(h.rt, x),
        Equals("cum_seq_lens_q: device cuda:1 differs from seq_lens's device cuda:0; they must be equal"));
    cum.device({kDLCUDA, 0}).strides({2});
    x.cum_seq_lens_q = cum.get();  // get() refreshes the strides pointer
    t::expect_refused(in.call_v3(h.rt, x), Contains("cum_seq_lens_q: strides [2] are not allowed for shape [3]"));
  }
  SECTION("seq_lens on another device than the query is named before cum_seq_lens_q is compared with it") {
    in.lens = t::DLTensorMaker({2}, t::kI32, {kDLCUDA, 1});
    cum.device({kDLCUDA, 1});
    t::expect_refused(in.call_v3(h.rt, x),
                      Equals("seq_lens: device cuda:1 differs from the query's device cuda:0; they must be equal"));
  }
}

TEST_CASE("trtllm _v3 checks the device-tensor scales, naming them", "[capi]") {
  t::CRuntime h;
  t::TrtllmInputs in;
  in.max_seq_len = 65;
  t::DLTensorMaker scalar({}, t::kF32), one({1}, t::kF32);
  t::TrtllmInputs::V3 x;

  SECTION("shape [] and [1], each or both, get through") {
    for (auto [b1, b2] : {std::pair{&scalar, &one}, std::pair{&one, &scalar}}) {
      x.bmm1_scale = b1->get();
      x.bmm2_scale = nullptr;
      t::expect_refused(in.call_v3(h.rt, x), Contains(kPastTheCChecks));
      x.bmm2_scale = b2->get();
      t::expect_refused(in.call_v3(h.rt, x), Contains(kPastTheCChecks));
    }
  }
  SECTION("dtype") {
    one.dtype(t::kF16);
    x.bmm1_scale = one.get();
    t::expect_refused(in.call_v3(h.rt, x),
                      Equals("bmm1_scale: dtype (code=2 kDLFloat, bits=16, lanes=1) is not allowed; allowed: float32 "
                             "(kDLFloat, 32)"));
    x.bmm1_scale = nullptr;
    one.dtype({kDLFloat, 64, 1});
    x.bmm2_scale = one.get();
    t::expect_refused(in.call_v3(h.rt, x),
                      Contains("bmm2_scale: dtype (code=2 kDLFloat, bits=64, lanes=1) is not allowed"));
  }
  SECTION("size: one value") {
    t::DLTensorMaker two({2}, t::kF32), one_by_one({1, 1}, t::kF32);
    x.bmm1_scale = two.get();
    t::expect_refused(in.call_v3(h.rt, x),
                      Equals("bmm1_scale: shape [2] is not allowed; allowed: [] or [1] (one float32 value)"));
    x.bmm1_scale = nullptr;
    x.bmm2_scale = one_by_one.get();
    t::expect_refused(in.call_v3(h.rt, x),
                      Equals("bmm2_scale: shape [1, 1] is not allowed; allowed: [] or [1] (one float32 value)"));
  }
  SECTION("device: read by the kernel, on the query's GPU") {
    one.device({kDLCPU, 0});
    x.bmm2_scale = one.get();
    t::expect_refused(
        in.call_v3(h.rt, x),
        Equals("bmm2_scale: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA (it is read by the kernel)"));
    one.device({kDLCUDA, 1});
    x.bmm2_scale = nullptr;
    x.bmm1_scale = one.get();
    t::expect_refused(
        in.call_v3(h.rt, x),
        Equals("bmm1_scale: device cuda:1 differs from the query's device cuda:0; they must be equal"));
  }
  SECTION("data and alignment") {
    scalar.data(nullptr);
    x.bmm1_scale = scalar.get();
    t::expect_refused(in.call_v3(h.rt, x), Equals("bmm1_scale: data is NULL for 1 elements"));
    one.byte_offset(2);
    x.bmm1_scale = one.get();
    t::expect_refused(in.call_v3(h.rt, x), Contains("bmm1_scale: address"));
    CHECK_THAT(t::c_last_error(), Contains("allowed: a multiple of 4 bytes (the element size)"));
  }
}

TEST_CASE("trtllm _v3 names itself, and _v1 / _v2 keep their behaviour through the shared path", "[capi]") {
  t::CRuntime h;
  t::TrtllmInputs in;
  CHECK(attnjit_trtllm_batch_decode_with_kv_cache_v3(nullptr, in.query.get(), in.k.get(), in.v.get(), nullptr, 0,
                                                     in.tables.get(), in.lens.get(), 64, nullptr, nullptr, -1, 1, 0,
                                                     nullptr, nullptr, nullptr, in.out.get(), nullptr, nullptr) ==
        ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(t::c_last_error(), Contains("attnjit_trtllm_batch_decode_with_kv_cache_v3: rt is NULL"));
  // _v1 and _v2 pass one token per request: 4 query rows are 4 requests, which block_tables does not hold.
  in.max_seq_len = 65;
  in.query = t::DLTensorMaker({4, 8, 128});
  const std::string four_requests = "block_tables: shape [2, 4] is not allowed; allowed: [batch_size, max_pages] "
                                    "(batch_size=4 from the query)";
  t::expect_refused(in.call(h.rt), Equals(four_requests));
  t::expect_refused(in.call_v2(h.rt, nullptr, -1), Equals(four_requests));
  t::TrtllmInputs::V3 x;
  x.q_len_per_req = 2;
  in.out = t::DLTensorMaker({4, 8, 128});
  t::expect_refused(in.call_v3(h.rt, x), Contains(kPastTheCChecks));
}

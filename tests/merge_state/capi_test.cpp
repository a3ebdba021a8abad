// attnjit_merge_state.h without a GPU: NULL handles and tensors, the C++
// merge checks reached through the C functions (dtype, head_dim, shapes,
// equal strides, contiguous outputs), and merge_state_in_place's mask
// (dtype, shape against v, device, contiguity), each refused with a message
// naming the argument, its value and what is allowed. Every call fails in
// validation, before the merge kernel would be loaded.
#include "support/dltensor_maker.hpp"  // first: includes dlpack through the compat shim
#include "support/c_runtime.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_merge_state.h"

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
namespace t = attnjit::test;

namespace {

// Two states of 4 positions, 8 heads, head_dim 128, float16, and the outputs: valid until spoiled.
struct TwoStates {
  t::DLTensorMaker v_a{{4, 8, 128}}, v_b{{4, 8, 128}}, s_a{{4, 8}, t::kF32}, s_b{{4, 8}, t::kF32};
  t::DLTensorMaker v_out{{4, 8, 128}}, s_out{{4, 8}, t::kF32};
  attnjit_status_t merge(attnjit_runtime_t* rt) {
    return attnjit_merge_state(rt, v_a.get(), s_a.get(), v_b.get(), s_b.get(), v_out.get(), s_out.get(), nullptr);
  }
  // In place: (v_a, s_a) is v, s; (v_b, s_b) is v_other, s_other.
  attnjit_status_t merge_in_place(attnjit_runtime_t* rt, const DLTensor* mask) {
    return attnjit_merge_state_in_place(rt, v_a.get(), s_a.get(), v_b.get(), s_b.get(), mask, nullptr);
  }
};

struct ManyStates {
  t::DLTensorMaker v{{4, 3, 8, 128}, t::kBF16}, s{{4, 3, 8}, t::kF32};
  t::DLTensorMaker v_out{{4, 8, 128}, t::kBF16}, s_out{{4, 8}, t::kF32};
  attnjit_status_t merge(attnjit_runtime_t* rt) {
    return attnjit_merge_states(rt, v.get(), s.get(), v_out.get(), s_out.get(), nullptr);
  }
};

}  // namespace

TEST_CASE("merge functions refuse a NULL runtime and NULL tensors, naming them", "[capi][merge_state]") {
  t::CRuntime h;
  TwoStates two;
  ManyStates many;
  t::expect_refused(two.merge(nullptr), Contains("attnjit_merge_state: rt is NULL; expected an attnjit_runtime_t*"));
  t::expect_refused(two.merge_in_place(nullptr, nullptr), Contains("attnjit_merge_state_in_place: rt is NULL"));
  t::expect_refused(many.merge(nullptr), Contains("attnjit_merge_states: rt is NULL"));

  CHECK(attnjit_merge_state(h.rt, two.v_a.get(), two.s_a.get(), nullptr, two.s_b.get(), two.v_out.get(), nullptr,
                            nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(t::c_last_error(), Equals("v_b: is NULL; expected a DLTensor*"));
  t::expect_refused(
      attnjit_merge_state(h.rt, two.v_a.get(), two.s_a.get(), two.v_b.get(), two.s_b.get(), nullptr, nullptr, nullptr),
      Equals("v_merged: is NULL; expected a DLTensor*"));
  t::expect_refused(
      attnjit_merge_state_in_place(h.rt, two.v_a.get(), nullptr, two.v_b.get(), two.s_b.get(), nullptr, nullptr),
      Equals("s: is NULL; expected a DLTensor*"));
  t::expect_refused(attnjit_merge_states(h.rt, many.v.get(), many.s.get(), nullptr, nullptr, nullptr),
                    Equals("v_merged: is NULL; expected a DLTensor*"));
}

TEST_CASE("merge_state checks its states and outputs through the C API", "[capi][merge_state]") {
  t::CRuntime h;
  TwoStates in;
  SECTION("host memory") {
    in.v_a.device({kDLCPU, 0});
    t::expect_refused(in.merge(h.rt), Contains("v_a: device_type=1 (kDLCPU) is not supported; allowed: kDLCUDA"));
  }
  SECTION("V dtype and head_dim") {
    in.v_a.dtype(t::kF32);
    t::expect_refused(in.merge(h.rt), Equals("v_a: dtype float32 is not supported; allowed: float16, bfloat16"));
    in = TwoStates{};
    in.v_a = t::DLTensorMaker({4, 8, 96});
    t::expect_refused(in.merge(h.rt),
                      Equals("v_a: head_dim=96 is not supported; supported: 64, 128, 256"), ATTNJIT_ERROR_UNSUPPORTED);
    in.v_a = t::DLTensorMaker({4, 1024});
    t::expect_refused(in.merge(h.rt), Contains("v_a: ndim=2 is not allowed; allowed: 3, [seq, num_heads, head_dim]"));
  }
  SECTION("S must be float32 [seq_len, num_heads]") {
    in.s_a.dtype(t::kF16);
    t::expect_refused(in.merge(h.rt), Contains("s_a: dtype must be float32"));
    in.s_a.dtype(t::kF32);
    in.s_b = t::DLTensorMaker({4, 4}, t::kF32);
    t::expect_refused(in.merge(h.rt), Contains("s_b: shape must be [4, 8]"));
  }
  SECTION("b matches a") {
    in.v_b = t::DLTensorMaker({4, 8, 128}, t::kBF16);
    t::expect_refused(in.merge(h.rt), Contains("v_b: dtype must be float16"));
    in.v_b = t::DLTensorMaker({5, 8, 128});
    t::expect_refused(in.merge(h.rt), Contains("v_b: shape must be [4, 8, 128]"));
    in.v_b = t::DLTensorMaker({4, 8, 128});
    in.v_b.strides({2048, 128, 1});  // a slice of a wider buffer: allowed alone, not beside a compact v_a
    t::expect_refused(in.merge(h.rt), Contains("v_b: strides differ from v_a's; they must be equal"));
    in.v_b = t::DLTensorMaker({4, 8, 128}, t::kF16, {kDLCUDA, 1});
    t::expect_refused(in.merge(h.rt), Contains("v_b: must be on cuda:0"));
  }
  SECTION("outputs: contiguous rows, lse contiguous") {
    in.v_out.strides({2048, 128, 1});
    t::expect_refused(in.merge(h.rt), Contains("v_merged: stride(0)=2048 is not allowed; rows must be contiguous"));
    in.v_out.strides({});
    in.s_out.strides({16, 1});
    t::expect_refused(in.merge(h.rt), Contains("s_merged: must be contiguous [seq, H] (stride(0)=16)"));
    in.s_out = t::DLTensorMaker({4, 8});  // float16 lse
    t::expect_refused(in.merge(h.rt), Contains("s_merged: dtype must be float32"));
  }
}

TEST_CASE("merge_state_in_place checks the mask against v", "[capi][merge_state]") {
  t::CRuntime h;
  TwoStates in;
  t::DLTensorMaker mask({4}, t::kBool);
  SECTION("bool, uint8 and int8 masks pass to the C++ checks that follow") {
    in.s_b.dtype(t::kF16);  // refused after the mask: reaching it shows the mask was accepted
    for (DLDataType d : {t::kBool, t::kU8, t::kI8}) {
      mask.dtype(d);
      t::expect_refused(in.merge_in_place(h.rt, mask.get()), Contains("s_other: dtype must be float32"));
    }
    t::expect_refused(in.merge_in_place(h.rt, nullptr), Contains("s_other: dtype must be float32"));
  }
  SECTION("dtype") {
    mask.dtype(t::kF16);
    t::expect_refused(in.merge_in_place(h.rt, mask.get()),
                      Equals("mask: dtype (code=2 kDLFloat, bits=16, lanes=1) is not allowed; allowed: bool (kDLBool, "
                             "8), uint8 (kDLUInt, 8) or int8 (kDLInt, 8)"));
    mask.dtype({kDLInt, 32, 1});
    t::expect_refused(in.merge_in_place(h.rt, mask.get()),
                      Contains("mask: dtype (code=0 kDLInt, bits=32, lanes=1) is not allowed"));
  }
  SECTION("one entry per sequence position of v") {
    t::DLTensorMaker short_mask({3}, t::kBool), grid({4, 8}, t::kBool);
    t::expect_refused(in.merge_in_place(h.rt, short_mask.get()),
                      Equals("mask: shape [3] is not allowed; allowed: [seq_len] with seq_len=4 from v"));
    t::expect_refused(in.merge_in_place(h.rt, grid.get()), Contains("mask: shape [4, 8] is not allowed"));
  }
  SECTION("device and contiguity") {
    mask.device({kDLCPU, 0});
    t::expect_refused(
        in.merge_in_place(h.rt, mask.get()),
        Equals("mask: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA (it is read by the kernel)"));
    mask.device({kDLCUDA, 2});
    t::expect_refused(in.merge_in_place(h.rt, mask.get()),
                      Equals("mask: device cuda:2 differs from v's device cuda:0; they must be equal"));
    mask.device({kDLCUDA, 0}).strides({2});
    t::expect_refused(in.merge_in_place(h.rt, mask.get()),
                      Equals("mask: strides [2] are not allowed for shape [4]; allowed: contiguous (stride 1)"));
  }
  SECTION("v is written: its rows must be contiguous") {
    in.v_a.strides({2048, 128, 1});
    in.v_b.strides({2048, 128, 1});
    t::expect_refused(in.merge_in_place(h.rt, mask.get()),
                      Contains("v: stride(0)=2048 is not allowed; rows must be contiguous"));
  }
  SECTION("a v of the wrong rank is named before the mask is looked at") {
    in.v_a = t::DLTensorMaker({4, 8, 2, 64});
    mask.dtype(t::kF16);
    t::expect_refused(in.merge_in_place(h.rt, mask.get()), Contains("v: ndim=4 is not allowed; allowed: 3"));
  }
}

TEST_CASE("merge_states checks its stacked states and outputs", "[capi][merge_state]") {
  t::CRuntime h;
  ManyStates in;
  SECTION("rank and number of states") {
    in.v = t::DLTensorMaker({4, 8, 128}, t::kBF16);
    t::expect_refused(in.merge(h.rt),
                      Equals("v: ndim=3 is not allowed; allowed: 4, [seq, num_states, num_heads, head_dim]"));
    in.v = t::DLTensorMaker({4, 0, 8, 128}, t::kBF16);
    t::expect_refused(in.merge(h.rt), Contains("v: num_states (shape[1])=0 is not allowed; it must be >= 1"));
  }
  SECTION("s matches v") {
    in.s = t::DLTensorMaker({4, 2, 8}, t::kF32);
    t::expect_refused(in.merge(h.rt), Contains("s: shape must be [4, 3, 8]"));
  }
  SECTION("outputs in v's dtype") {
    in.v_out = t::DLTensorMaker({4, 8, 128}, t::kF16);
    t::expect_refused(in.merge(h.rt), Contains("v_merged: dtype must be bfloat16"));
    in.v_out = t::DLTensorMaker({4, 8, 128}, t::kBF16);
    in.s_out = t::DLTensorMaker({8, 4}, t::kF32);
    t::expect_refused(in.merge(h.rt), Contains("s_merged: shape must be [4, 8]"));
  }
}

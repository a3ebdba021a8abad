// TensorView and from_dlpack: what a DLPack producer may hand us, and the
// exact wording of every refusal (argument name, offending value, what is allowed).
#include "support/dltensor_maker.hpp"  // first: includes dlpack through the compat shim

#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "attnjit/error.hpp"
#include "attnjit/tensor.hpp"
#include "support/error_capture.hpp"

using attnjit::DType;
using attnjit::Error;
using attnjit::from_dlpack;
using attnjit::Status;
using attnjit::TensorView;
using attnjit::test::DLTensorMaker;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
namespace t = attnjit::test;

namespace {

// The InvalidArgument message of a from_dlpack call that must fail.
template <typename F>
std::string invalid_message(F&& call) {
  return t::error_of(std::forward<F>(call), Status::InvalidArgument);
}

}  // namespace

TEST_CASE("from_dlpack accepts the supported dtypes", "[capi][tensor]") {
  struct Case { DLDataType dl; DType want; };
  for (const Case c : {Case{t::kF16, DType::F16}, Case{t::kBF16, DType::BF16}, Case{t::kF32, DType::F32},
                       Case{t::kE4M3, DType::E4M3}, Case{t::kE5M2, DType::E5M2}}) {
    DLTensorMaker m({32, 128}, c.dl);
    CHECK(from_dlpack(m.get(), "q").dtype == c.want);
  }
}

TEST_CASE("from_dlpack fills row-major strides when DLPack gives none", "[capi][tensor]") {
  DLTensorMaker m({7, 4, 64}, t::kBF16, {kDLCUDA, 3});
  const TensorView v = from_dlpack(m.get(), "k");
  CHECK(v.ndim == 3);
  CHECK(v.shape[0] == 7);
  CHECK(v.shape[1] == 4);
  CHECK(v.shape[2] == 64);
  CHECK(v.strides[0] == 256);
  CHECK(v.strides[1] == 64);
  CHECK(v.strides[2] == 1);
  CHECK(v.device == 3);
  CHECK(v.numel() == 7 * 4 * 64);
  CHECK(v.data == t::fake_device_pointer());
}

TEST_CASE("from_dlpack keeps explicit strides and applies byte_offset", "[capi][tensor]") {
  DLTensorMaker m({4, 7, 64}, t::kF16);
  m.strides({64, 256, 1}).byte_offset(4096);  // an HND view of an NHD buffer
  const TensorView v = from_dlpack(m.get(), "v");
  CHECK(v.strides[0] == 64);
  CHECK(v.strides[1] == 256);
  CHECK(v.strides[2] == 1);
  CHECK(v.data == static_cast<char*>(t::fake_device_pointer()) + 4096);
}

TEST_CASE("from_dlpack allows a NULL data pointer (plans describe shapes only)", "[capi][tensor]") {
  DLTensorMaker m({8, 128});
  m.data(nullptr);
  CHECK(from_dlpack(m.get(), "q").data == nullptr);
}

TEST_CASE("from_dlpack accepts ranks 1 to 4 and empty dimensions", "[capi][tensor]") {
  DLTensorMaker one({5}), four({2, 3, 4, 5}), empty({0, 8, 128});
  CHECK(from_dlpack(one.get(), "lse").ndim == 1);
  CHECK(from_dlpack(four.get(), "x").numel() == 120);
  CHECK(from_dlpack(empty.get(), "k").numel() == 0);
}

TEST_CASE("describe and make_tensor", "[capi][tensor]") {
  const TensorView v = attnjit::make_tensor(nullptr, DType::BF16, {32, 128});
  CHECK(v.strides[0] == 128);
  CHECK(v.strides[1] == 1);
  CHECK_THAT(v.describe(), Equals("bfloat16[32, 128] strides [128, 1] on cuda:0"));
  CHECK_THAT(invalid_message([] { attnjit::make_tensor(nullptr, DType::F16, {1, 2, 3, 4, 5}); }),
             Contains("make_tensor: shape has 5 dims; allowed: up to 4"));
  CHECK_THAT(invalid_message([] { attnjit::make_tensor(nullptr, DType::F16, {4, -1}); }),
             Contains("make_tensor: shape[1]=-1 is negative"));
}

TEST_CASE("from_dlpack with a dtype override re-labels raw bytes", "[capi][tensor]") {
  DLTensorMaker u8({16, 4, 128}, t::kU8), i8({16, 4, 128}, t::kI8), e4m3({16, 4, 128}, t::kE4M3);
  CHECK(from_dlpack(u8.get(), "k", DType::E4M3).dtype == DType::E4M3);
  CHECK(from_dlpack(i8.get(), "k", DType::E5M2).dtype == DType::E5M2);
  CHECK(from_dlpack(e4m3.get(), "k", DType::E4M3).dtype == DType::E4M3);  // already that dtype
  // Without an override, bytes stay bytes: uint8 is not an element type we compute in.
  CHECK_THROWS_AS(from_dlpack(u8.get(), "k", std::nullopt), Error);
}

TEST_CASE("from_dlpack refuses a wrong dtype override, naming both dtypes", "[capi][tensor]") {
  DLTensorMaker f16({16, 128}, t::kF16), u16({16, 128}, DLDataType{kDLUInt, 16, 1}), e5m2({16, 128}, t::kE5M2);
  const std::string a = invalid_message([&] { from_dlpack(f16.get(), "k", DType::E4M3); });
  CHECK_THAT(a, Contains("k: dtype (code=2 kDLFloat, bits=16, lanes=1) cannot be viewed as float8_e4m3fn"));
  CHECK_THAT(a, Contains("allowed: a 8-bit integer tensor (raw bytes) or a float8_e4m3fn tensor"));
  CHECK_THAT(invalid_message([&] { from_dlpack(u16.get(), "v", DType::E5M2); }),
             Contains("v: dtype (code=1 kDLUInt, bits=16, lanes=1) cannot be viewed as float8_e5m2"));
  CHECK_THAT(invalid_message([&] { from_dlpack(e5m2.get(), "k", DType::E4M3); }),
             Contains("k: dtype (code=12 kDLFloat8_e5m2, bits=8, lanes=1) cannot be viewed as float8_e4m3fn"));
}

TEST_CASE("from_dlpack refuses memory that is not CUDA device memory", "[capi][tensor]") {
  DLTensorMaker cpu({8, 128}, t::kF16, {kDLCPU, 0});
  CHECK_THAT(invalid_message([&] { from_dlpack(cpu.get(), "q"); }),
             Equals("q: device_type=1 (kDLCPU) is not supported; allowed: kDLCUDA (CUDA device memory)"));
  DLTensorMaker host({8, 128}, t::kF16, {kDLCUDAHost, 0});
  CHECK_THAT(invalid_message([&] { from_dlpack(host.get(), "k"); }),
             Contains("k: device_type=3 (kDLCUDAHost) is not supported; allowed: kDLCUDA"));
  DLTensorMaker managed({8, 128}, t::kF16, {kDLCUDAManaged, 0});
  const std::string m = invalid_message([&] { from_dlpack(managed.get(), "v"); });
  CHECK_THAT(m, Contains("v: device_type=13 (kDLCUDAManaged) is not supported"));
  CHECK_THAT(m, Contains("allowed: kDLCUDA"));
  DLTensorMaker rocm({8, 128}, t::kF16, {kDLROCM, 0});
  CHECK_THAT(invalid_message([&] { from_dlpack(rocm.get(), "o"); }), Contains("o: device_type=10 (kDLROCM)"));
  DLTensorMaker negative({8, 128}, t::kF16, {kDLCUDA, -1});
  CHECK_THAT(invalid_message([&] { from_dlpack(negative.get(), "q"); }),
             Contains("q: device_id=-1 is negative; allowed: a CUDA device ordinal >= 0"));
}

TEST_CASE("from_dlpack refuses unsupported dtypes, naming code, bits and lanes", "[capi][tensor]") {
  DLTensorMaker i8({8, 128}, t::kI8), f64({8, 128}, DLDataType{kDLFloat, 64, 1}),
      vec({8, 128}, DLDataType{kDLFloat, 16, 4});
  const std::string a = invalid_message([&] { from_dlpack(i8.get(), "q"); });
  CHECK_THAT(a, Contains("q: dtype (code=0 kDLInt, bits=8, lanes=1) is not supported; allowed: float16"));
  CHECK_THAT(a, Contains("float8_e4m3fn (code 10, bits 8)"));
  CHECK_THAT(invalid_message([&] { from_dlpack(f64.get(), "k"); }),
             Contains("k: dtype (code=2 kDLFloat, bits=64, lanes=1) is not supported"));
  CHECK_THAT(invalid_message([&] { from_dlpack(vec.get(), "v"); }),
             Contains("v: dtype (code=2 kDLFloat, bits=16, lanes=4) has lanes=4; allowed: lanes=1"));
}

TEST_CASE("from_dlpack refuses bad ranks, shapes and strides", "[capi][tensor]") {
  CHECK_THAT(invalid_message([] { from_dlpack(nullptr, "q"); }), Equals("q: is NULL; expected a DLTensor*"));

  DLTensorMaker five({1, 2, 3, 4, 5}), zero({});
  CHECK_THAT(invalid_message([&] { from_dlpack(five.get(), "k"); }),
             Equals("k: ndim=5 is not supported; allowed: 1 to 4"));
  CHECK_THAT(invalid_message([&] { from_dlpack(zero.get(), "q"); }), Contains("q: ndim=0 is not supported"));

  DLTensorMaker no_shape({8, 128});
  no_shape.no_shape();
  CHECK_THAT(invalid_message([&] { from_dlpack(no_shape.get(), "v"); }), Contains("v: shape is NULL with ndim=2"));

  DLTensorMaker negative({8, -3, 128});
  CHECK_THAT(invalid_message([&] { from_dlpack(negative.get(), "k"); }),
             Equals("k: shape[1]=-3 is negative; allowed: >= 0"));

  DLTensorMaker huge({int64_t{1} << 40, int64_t{1} << 40});
  CHECK_THAT(invalid_message([&] { from_dlpack(huge.get(), "k"); }),
             Contains("k: shape [1099511627776, 1099511627776] has more than 2^63 elements"));

  DLTensorMaker reversed({8, 128});
  reversed.strides({-128, 1});
  CHECK_THAT(invalid_message([&] { from_dlpack(reversed.get(), "q"); }),
             Equals("q: strides[0]=-128 is negative; allowed: >= 0 (elements)"));
}

TEST_CASE("from_dlpack names a NULL argument name as 'tensor'", "[capi][tensor]") {
  DLTensorMaker cpu({8}, t::kF16, {kDLCPU, 0});
  CHECK_THAT(invalid_message([&] { from_dlpack(cpu.get(), nullptr); }), Contains("tensor: device_type=1"));
}

// The C API's contract without a GPU: status codes and their strings, the
// thread-local errno-like last error, NULL handles and out pointers, bad
// enums and flags, and DLTensors that disagree, each refused with a message
// naming the parameter. Nothing here reaches a kernel: every call fails in
// validation before the plan would compile anything.
#include "support/dltensor_maker.hpp"  // first: includes dlpack through the compat shim
#include "support/c_runtime.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>

#include "api/c_api_convert.hpp"
#include "ops/single_decode/single_decode_problem.hpp"
#include "attnjit/attnjit.h"
#include "attnjit/attnjit_fp8.h"
#include "attnjit/version.h"

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
namespace t = attnjit::test;

namespace {

// A Runtime handle for the tests that must get past the `rt` check.

// q [8, 128], k and v [1000, 2, 128] NHD, fp16: a valid problem to spoil one field at a time.
struct DecodeInputs {
  t::DLTensorMaker q{{8, 128}}, k{{1000, 2, 128}}, v{{1000, 2, 128}};
  attnjit_decode_options_t options{};
  DecodeInputs() { attnjit_decode_options_init(&options); }

  attnjit_status_t plan(attnjit_runtime_t* rt) {
    auto* p = reinterpret_cast<attnjit_single_decode_plan_t*>(uintptr_t{0x1});  // must come back NULL
    const attnjit_status_t s = attnjit_single_decode_plan(rt, q.get(), k.get(), v.get(), &options, 0, &p);
    CHECK(p == nullptr);  // set to NULL on failure, whatever it held
    if (s == ATTNJIT_OK) attnjit_single_decode_plan_destroy(p);
    return s;
  }
};

}  // namespace

TEST_CASE("version string and number agree with version.h", "[capi]") {
  CHECK(attnjit_version_number() == ATTNJIT_VERSION_NUMBER);
  CHECK_THAT(std::string(attnjit_version()),
             Equals(fmt::format("{}.{}.{}", ATTNJIT_VERSION_MAJOR, ATTNJIT_VERSION_MINOR, ATTNJIT_VERSION_PATCH)));
}

TEST_CASE("every status has its own static string", "[capi]") {
  std::set<std::string> seen;
  for (int s = ATTNJIT_OK; s <= ATTNJIT_ERROR_INTERNAL; ++s) {
    const char* text = attnjit_status_string(static_cast<attnjit_status_t>(s));
    REQUIRE(text != nullptr);
    CHECK(std::string(text) != "unknown status");
    CHECK(seen.insert(text).second);
  }
  CHECK_THAT(attnjit_status_string(ATTNJIT_OK), Equals("ok"));
  CHECK_THAT(attnjit_status_string(ATTNJIT_ERROR_INVALID_ARGUMENT), Equals("invalid argument"));
  CHECK_THAT(attnjit_status_string(static_cast<attnjit_status_t>(42)), Equals("unknown status"));
  CHECK_THAT(attnjit_status_string(static_cast<attnjit_status_t>(-1)), Equals("unknown status"));
}

TEST_CASE("decode options init sets FlashInfer's defaults", "[capi]") {
  const auto o = t::initialized<attnjit_decode_options_t>([](auto* x) { attnjit_decode_options_init(x); });
  CHECK(o.kv_layout == ATTNJIT_KV_LAYOUT_NHD);
  CHECK(o.pos_encoding_mode == ATTNJIT_POS_ENCODING_NONE);
  CHECK(o.use_tensor_cores == 0);
  CHECK(o.window_left == -1);
  for (float f : {o.q_scale, o.k_scale, o.v_scale, o.logits_soft_cap, o.sm_scale, o.rope_scale, o.rope_theta})
    CHECK(f == 0.0f);
  (attnjit_decode_options_init)(nullptr);  // void: nothing to report, must not crash (the unsized symbol)
  attnjit_decode_options_init_sized(nullptr, 64);
}

TEST_CASE("NULL handles and out pointers are refused, naming the parameter", "[capi]") {
  t::expect_refused(attnjit_runtime_create(nullptr), Contains("attnjit_runtime_create: out is NULL"));

  DecodeInputs in;
  attnjit_single_decode_plan_t* plan = nullptr;
  t::expect_refused(attnjit_single_decode_plan(nullptr, in.q.get(), in.k.get(), in.v.get(), &in.options, 0, &plan),
                    Contains("attnjit_single_decode_plan: rt is NULL; expected an attnjit_runtime_t*"));

  size_t bytes = 0;
  t::expect_refused(attnjit_single_decode_plan_workspace_bytes(nullptr, &bytes),
                    Contains("attnjit_plan_workspace_bytes: plan is NULL"));

  t::DLTensorMaker o({8, 128});
  t::expect_refused(
      attnjit_single_decode_run(nullptr, in.q.get(), in.k.get(), in.v.get(), o.get(), nullptr, nullptr, 0, nullptr),
      Contains("attnjit_single_decode_run: plan is NULL"));

  CHECK(attnjit_single_decode_with_kv_cache(nullptr, in.q.get(), in.k.get(), in.v.get(), o.get(), nullptr,
                                            &in.options, nullptr, 0, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(t::c_last_error(), Contains("attnjit_single_decode_with_kv_cache: rt is NULL"));

  // Destroying nothing is fine, as with free(NULL).
  CHECK(attnjit_runtime_destroy(nullptr) == ATTNJIT_OK);
  CHECK(attnjit_single_decode_plan_destroy(nullptr) == ATTNJIT_OK);
}

TEST_CASE("plan refuses a NULL out pointer and a non-flag return_lse", "[capi]") {
  t::CRuntime h;
  DecodeInputs in;
  t::expect_refused(attnjit_single_decode_plan(h.rt, in.q.get(), in.k.get(), in.v.get(), &in.options, 0, nullptr),
                    Contains("attnjit_single_decode_plan: out is NULL"));
  attnjit_single_decode_plan_t* plan = nullptr;
  t::expect_refused(attnjit_single_decode_plan(h.rt, in.q.get(), in.k.get(), in.v.get(), &in.options, 2, &plan),
                    Equals("attnjit_single_decode_plan: return_lse=2 is not a flag; allowed: 0, 1"));
}

TEST_CASE("plan refuses bad option values, naming the field", "[capi]") {
  t::CRuntime h;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const struct {
    std::function<void(attnjit_decode_options_t&)> spoil;
    const char* message;  // the whole last error
  } cases[] = {
      {[](auto& o) { o.kv_layout = 7; }, "options->kv_layout=7 is not a layout; allowed: 0 (NHD), 1 (HND)"},
      {[](auto& o) { o.pos_encoding_mode = -1; },
       "options->pos_encoding_mode=-1 is not a positional encoding; allowed: 0 (NONE), 1 (ROPE_LLAMA), 2 (ALIBI)"},
      {[](auto& o) { o.use_tensor_cores = 3; }, "options->use_tensor_cores=3 is not a flag; allowed: 0, 1"},
      {[](auto& o) { o.window_left = -2; },
       "options->window_left=-2 is not allowed; allowed: -1 (whole sequence) or >= 0"},
      {[&](auto& o) { o.sm_scale = nan; },
       "options->sm_scale=nan is not finite; allowed: a finite value, or 0 for the default"},
      {[&](auto& o) { o.rope_theta = inf; },
       "options->rope_theta=inf is not finite; allowed: a finite value, or 0 for the default"},
  };
  for (const auto& c : cases) {
    DecodeInputs in;
    c.spoil(in.options);
    t::expect_refused(in.plan(h.rt), Equals(c.message));
  }
}

TEST_CASE("plan refuses DLTensors that are wrong or disagree, naming the argument", "[capi]") {
  t::CRuntime h;
  {
    DecodeInputs in;
    attnjit_single_decode_plan_t* plan = nullptr;
    t::expect_refused(attnjit_single_decode_plan(h.rt, nullptr, in.k.get(), in.v.get(), &in.options, 0, &plan),
                      Equals("q: is NULL; expected a DLTensor*"));
  }
  const struct {
    std::function<void(DecodeInputs&)> spoil;
    const char* message;  // the whole last error
  } cases[] = {
      {[](auto& in) { in.q.device({kDLCPU, 0}); },
       "q: device_type=1 (kDLCPU) is not supported; allowed: kDLCUDA (CUDA device memory)"},
      {[](auto& in) { in.q = t::DLTensorMaker({1, 8, 128}); },
       "q: ndim=3 (shape [1, 8, 128]) is not allowed; allowed: 2, [num_qo_heads, head_dim]"},
      {[](auto& in) {
         in.k = t::DLTensorMaker({1000, 128});
         in.options.kv_layout = ATTNJIT_KV_LAYOUT_HND;
       },
       "k: ndim=2 (shape [1000, 128]) is not allowed; allowed: 3, [num_kv_heads, kv_len, head_dim] for kv_layout "
       "HND"},
      {[](auto& in) { in.v = t::DLTensorMaker({999, 2, 128}); },
       "v: shape [999, 2, 128] differs from k's shape [1000, 2, 128]; they must be equal"},
      {[](auto& in) { in.v.dtype(t::kBF16); }, "v: dtype bfloat16 differs from k's dtype float16; they must be equal"},
      {[](auto& in) {
         in.k = t::DLTensorMaker({1000, 2, 64});
         in.v = t::DLTensorMaker({1000, 2, 64});
       },
       "k: head_dim (shape[2])=64 differs from q's head_dim (shape[1])=128; they must be equal"},
      {[](auto& in) { in.k.device({kDLCUDA, 1}); },
       "k: device cuda:1 differs from q's device cuda:0; all tensors must be on one device"},
      {[](auto& in) { in.k.dtype(t::kU8); },
       "k: dtype (code=1 kDLUInt, bits=8, lanes=1) is not supported; allowed: float16 (kDLFloat,16), bfloat16 "
       "(kDLBfloat,16), float32 (kDLFloat,32), float8_e4m3fn (code 10, bits 8), float8_e5m2 (code 12, bits 8); fp8 "
       "may also arrive as 8-bit integers with a dtype override"},
  };
  for (const auto& c : cases) {
    DecodeInputs in;
    c.spoil(in);
    t::expect_refused(in.plan(h.rt), Equals(c.message));
  }
}

TEST_CASE("with_kv_cache refuses a bad output tensor before running", "[capi]") {
  t::CRuntime h;
  DecodeInputs in;
  t::DLTensorMaker o({8, 128}, t::kF16, {kDLCPU, 0});
  CHECK(attnjit_single_decode_with_kv_cache(h.rt, in.q.get(), in.k.get(), in.v.get(), o.get(), nullptr, nullptr,
                                            nullptr, 0, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(t::c_last_error(), Contains("o: device_type=1 (kDLCPU)"));
  t::DLTensorMaker o_ok({8, 128}), lse({8}, t::kF32, {kDLCUDAManaged, 0});
  CHECK(attnjit_single_decode_with_kv_cache(h.rt, in.q.get(), in.k.get(), in.v.get(), o_ok.get(), lse.get(),
                                            nullptr, nullptr, 0, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(t::c_last_error(), Contains("lse: device_type=13 (kDLCUDAManaged)"));
}

TEST_CASE("options and shapes convert to the C++ problem", "[capi]") {
  attnjit_decode_options_t c;
  attnjit_decode_options_init(&c);
  c.kv_layout = ATTNJIT_KV_LAYOUT_HND;
  c.pos_encoding_mode = ATTNJIT_POS_ENCODING_ROPE_LLAMA;
  c.use_tensor_cores = 1;
  c.window_left = 128;
  c.logits_soft_cap = 30.0f;
  c.rope_theta = 5e5f;
  const attnjit::SingleDecodeOptions o = attnjit::capi::to_options(&c, true);
  CHECK(o.kv_layout == attnjit::KVLayout::HND);
  CHECK(o.pos_encoding_mode == attnjit::PosEncoding::RopeLlama);
  CHECK(o.use_tensor_cores);
  CHECK(o.window_left == 128);
  CHECK(o.return_lse);
  CHECK(o.logits_soft_cap == 30.0f);
  CHECK(o.rope_theta == 5e5f);
  // 0 means "not provided": FlashInfer's defaults apply downstream.
  CHECK_FALSE(o.sm_scale.has_value());
  CHECK_FALSE(o.q_scale.has_value());
  CHECK_FALSE(o.rope_scale.has_value());

  const attnjit::SingleDecodeOptions defaults = attnjit::capi::to_options(nullptr, false);
  CHECK(defaults.kv_layout == attnjit::KVLayout::NHD);
  CHECK(defaults.window_left == -1);
  CHECK_FALSE(defaults.return_lse);

  // HND: k is [num_kv_heads, kv_len, head_dim].
  t::DLTensorMaker q({32, 64}, t::kBF16, {kDLCUDA, 2}), k({8, 77, 64}, t::kE4M3, {kDLCUDA, 2}),
      v({8, 77, 64}, t::kE4M3, {kDLCUDA, 2});
  const attnjit::SingleDecodeProblem p = attnjit::ops::single_decode_problem_from_tensors(
      attnjit::from_dlpack(q.get(), "q"), attnjit::from_dlpack(k.get(), "k"), attnjit::from_dlpack(v.get(), "v"), o);
  CHECK(p.num_qo_heads == 32);
  CHECK(p.head_dim == 64);
  CHECK(p.num_kv_heads == 8);
  CHECK(p.kv_len == 77);
  CHECK(p.q_dtype == attnjit::DType::BF16);
  CHECK(p.kv_dtype == attnjit::DType::E4M3);
  CHECK(p.device == 2);
  CHECK(p.options.return_lse);

  // NHD: k is [kv_len, num_kv_heads, head_dim].
  const attnjit::SingleDecodeProblem n = attnjit::ops::single_decode_problem_from_tensors(
      attnjit::from_dlpack(q.get(), "q"), attnjit::from_dlpack(k.get(), "k"), attnjit::from_dlpack(v.get(), "v"),
      defaults);
  CHECK(n.num_kv_heads == 77);
  CHECK(n.kv_len == 8);
}

TEST_CASE("the last error is per thread and kept until the next failure", "[capi]") {
  std::string fresh_thread_error = "unset", other_thread_error;
  std::thread([&] { fresh_thread_error = t::c_last_error(); }).join();
  CHECK(fresh_thread_error.empty());

  REQUIRE(attnjit_runtime_create(nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  const std::string mine = t::c_last_error();
  CHECK_THAT(mine, Contains("attnjit_runtime_create: out is NULL"));

  std::thread([&] {
    other_thread_error = t::c_last_error();  // this thread has not failed yet
    attnjit_single_decode_plan_workspace_bytes(nullptr, nullptr);
  }).join();
  CHECK(other_thread_error.empty());
  CHECK(t::c_last_error() == mine);  // the other thread's failure did not touch ours

  // A success does not clear it (errno-like).
  CHECK(attnjit_single_decode_plan_destroy(nullptr) == ATTNJIT_OK);
  CHECK(t::c_last_error() == mine);
}

TEST_CASE("attnjit_dltensor_view_as re-labels raw bytes as fp8", "[capi]") {
  t::DLTensorMaker bytes({1000, 2, 128}, t::kU8);
  bytes.byte_offset(256);
  DLTensor out{};
  REQUIRE(attnjit_dltensor_view_as(bytes.get(), "float8_e4m3fn", &out) == ATTNJIT_OK);
  CHECK(out.dtype.code == ATTNJIT_DLPACK_FLOAT8_E4M3FN);
  CHECK(out.dtype.bits == 8);
  CHECK(out.dtype.lanes == 1);
  CHECK(out.shape == bytes.get()->shape);  // a view: src's arrays, not copies
  CHECK(out.byte_offset == 256);
  CHECK(attnjit::from_dlpack(&out, "k").dtype == attnjit::DType::E4M3);

  REQUIRE(attnjit_dltensor_view_as(bytes.get(), "e5m2", &out) == ATTNJIT_OK);
  CHECK(out.dtype.code == ATTNJIT_DLPACK_FLOAT8_E5M2);

  t::DLTensorMaker half({8, 128}, t::kF16);
  t::expect_refused(attnjit_dltensor_view_as(half.get(), "float8_e4m3fn", &out),
                    Contains("attnjit_dltensor_view_as: src dtype (code=2 kDLFloat, bits=16, lanes=1) cannot be viewed "
                             "as float8_e4m3fn"));
  t::expect_refused(attnjit_dltensor_view_as(bytes.get(), "float9", &out),
                    Contains("dtype='float9' is not a dtype; allowed:"));
  t::expect_refused(attnjit_dltensor_view_as(bytes.get(), "e4m3", nullptr),
                    Contains("attnjit_dltensor_view_as: out is NULL"));
  t::expect_refused(attnjit_dltensor_view_as(nullptr, "e4m3", &out), Contains("attnjit_dltensor_view_as: src is NULL"));
}

// attnjit_batch_decode.h without a GPU: options init defaults, struct_size,
// NULL handles, enum/flag/float checks, index arrays of the wrong dtype,
// device, shape or strides, TensorRT-LLM's sinks and enable_pdl (the _v2
// entry point), the 5-D cache split, and the C++ checks reached
// through the C functions -- each refused with a message naming the
// argument, its value and what is allowed; cuDNN's ragged batch offsets of q
// and out (its _v2 entry point) likewise. Nothing here reaches a kernel:
// every call fails in validation before a plan would need a device.
#include "support/trtllm_c_inputs.hpp"  // first: includes dlpack through the compat shim

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>

#include "api/c_api_batch_decode_options.hpp"
#include "api/c_api_batch_inputs.hpp"
#include "attnjit/attnjit.h"
#include "attnjit/attnjit_batch_decode.h"

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;
namespace t = attnjit::test;

namespace {

// A non-graph wrapper over a made-up workspace address: creating one touches no device.
struct WrapperHandle {
  attnjit_plan_t* w = nullptr;
  explicit WrapperHandle(attnjit_runtime_t* rt) {
    INFO(attnjit_last_error());
    REQUIRE(attnjit_batch_decode_wrapper_create(rt, t::fake_device_pointer(), 128 << 20, nullptr, nullptr, nullptr,
                                                nullptr, &w) == ATTNJIT_OK);
  }
  ~WrapperHandle() { attnjit_plan_destroy(w); }
};

struct CudnnInputs {
  t::DLTensorMaker q{{2, 8, 128}}, k{{10, 2, 16, 128}}, v{{10, 2, 16, 128}}, out{{2, 8, 128}};
  t::DLTensorMaker tables{{2, 4}, t::kI32}, lens{{2}, t::kI32};
  float scale = 0.088f;
  int64_t max_sequence_kv = 64;
  attnjit_status_t call(attnjit_runtime_t* rt) {
    return attnjit_cudnn_batch_decode_with_kv_cache(rt, q.get(), k.get(), v.get(), scale, t::fake_device_pointer(),
                                                    128 << 20, max_sequence_kv, lens.get(), tables.get(), out.get(),
                                                    nullptr);
  }
  attnjit_status_t call_v2(attnjit_runtime_t* rt, const DLTensor* offsets_q, const DLTensor* offsets_o) {
    return attnjit_cudnn_batch_decode_with_kv_cache_v2(rt, q.get(), k.get(), v.get(), scale, t::fake_device_pointer(),
                                                       128 << 20, max_sequence_kv, lens.get(), tables.get(),
                                                       offsets_q, offsets_o, out.get(), nullptr);
  }
};

}  // namespace

TEST_CASE("batch decode options init sets FlashInfer's and TensorRT-LLM's defaults", "[capi]") {
  const auto w = t::initialized<attnjit_batch_decode_wrapper_options_t>(
      [](auto* o) { attnjit_batch_decode_wrapper_options_init(o); });
  CHECK(w.kv_layout == ATTNJIT_KV_LAYOUT_NHD);
  CHECK((w.use_cuda_graph == 0 && w.use_tensor_cores == 0 && w.device == 0));

  const auto p = t::initialized<attnjit_batch_decode_plan_options_t>(
      [](auto* o) { attnjit_batch_decode_plan_options_init(o); });
  CHECK(p.pos_encoding_mode == ATTNJIT_POS_ENCODING_NONE);
  CHECK(p.window_left == -1);
  CHECK((p.q_data_type.code == kDLFloat && p.q_data_type.bits == 16 && p.q_data_type.lanes == 1));
  CHECK(p.kv_data_type.bits == 0);
  for (float f : {p.logits_soft_cap, p.sm_scale, p.rope_scale, p.rope_theta}) CHECK(f == 0.0f);

  const auto r = t::initialized<attnjit_trtllm_decode_options_t>(
      [](auto* o) { attnjit_trtllm_decode_options_init(o); });
  CHECK(r.kv_layout == ATTNJIT_KV_LAYOUT_HND);
  CHECK(r.window_left == -1);
  CHECK(r.uses_shared_paged_kv_idx == 1);
  CHECK(r.use_tensor_cores == 0);
  CHECK((r.bmm1_scale == 1.0f && r.bmm2_scale == 1.0f));

  // void: nothing to report through, must not crash.
  attnjit_batch_decode_wrapper_options_init(nullptr);
  (attnjit_batch_decode_plan_options_init)(nullptr);  // the unsized symbol; the macro takes a typed pointer
  attnjit_batch_decode_plan_options_init_sized(nullptr, 64);
  attnjit_trtllm_decode_options_init(nullptr);
}

TEST_CASE("batch decode refuses NULL handles and out pointers, naming the parameter", "[capi]") {
  t::CRuntime h;
  attnjit_plan_t* w = reinterpret_cast<attnjit_plan_t*>(uintptr_t{0x1});
  CHECK(attnjit_batch_decode_wrapper_create(nullptr, t::fake_device_pointer(), 1 << 20, nullptr, nullptr, nullptr,
                                            nullptr, &w) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(w == nullptr);  // set to NULL on failure
  CHECK_THAT(t::c_last_error(),
             Contains("attnjit_batch_decode_wrapper_create: rt is NULL; expected an attnjit_runtime_t*"));
  CHECK(attnjit_batch_decode_wrapper_create(h.rt, t::fake_device_pointer(), 1 << 20, nullptr, nullptr, nullptr,
                                            nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(t::c_last_error(), Contains("attnjit_batch_decode_wrapper_create: out is NULL"));
  t::expect_refused(attnjit_batch_decode_wrapper_create(h.rt, nullptr, 1 << 20, nullptr, nullptr, nullptr, nullptr, &w),
                    Contains("float_workspace_buffer is NULL"));

  t::HostInts indptr({0, 1}), indices({0}), last({1});
  CHECK(attnjit_batch_decode_wrapper_plan(nullptr, indptr.t.get(), indices.t.get(), last.t.get(), 8, 2, 128, 16,
                                          nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(t::c_last_error(), Contains("attnjit_batch_decode_wrapper_plan: plan is NULL"));
  t::DLTensorMaker q({1, 8, 128}), kv({4, 16, 2, 128}), o({1, 8, 128});
  t::expect_refused(
      attnjit_batch_decode_wrapper_run(nullptr, q.get(), kv.get(), kv.get(), o.get(), nullptr, 0, 0, nullptr),
      Contains("attnjit_batch_decode_wrapper_run: plan is NULL"));
  t::expect_refused(
      attnjit_batch_decode_wrapper_run_v2(nullptr, q.get(), kv.get(), kv.get(), o.get(), nullptr, 0, 0, -1, nullptr),
      Contains("attnjit_batch_decode_wrapper_run_v2: plan is NULL"));
  t::expect_refused(
      attnjit_batch_decode_wrapper_run_v2(nullptr, q.get(), kv.get(), kv.get(), o.get(), nullptr, 0, 0, 3, nullptr),
      Contains("enable_pdl=3 is not allowed; allowed: -1 (the library's default"));

  t::TrtllmInputs tr;
  t::expect_refused(tr.call(nullptr), Contains("attnjit_trtllm_batch_decode_with_kv_cache: rt is NULL"));
  CudnnInputs cu;
  t::expect_refused(cu.call(nullptr), Contains("attnjit_cudnn_batch_decode_with_kv_cache: rt is NULL"));
}

TEST_CASE("a wrapper is a generic plan handle of operator batch_decode", "[capi]") {
  t::CRuntime h;
  WrapperHandle w(h.rt);
  CHECK_THAT(attnjit_plan_operator(w.w), Equals("batch_decode"));
  size_t bytes = 123;
  REQUIRE(attnjit_plan_workspace_bytes(w.w, &bytes) == ATTNJIT_OK);
  CHECK(bytes == 0);  // nothing planned yet
  char buf[128];
  REQUIRE(attnjit_plan_describe(w.w, buf, sizeof buf, nullptr) == ATTNJIT_OK);
  CHECK_THAT(std::string(buf), Contains("not planned"));

  SECTION("run before plan is NOT_PLANNED") {
    t::DLTensorMaker q({1, 8, 128}), kv({4, 16, 2, 128}), o({1, 8, 128});
    t::expect_refused(
        attnjit_batch_decode_wrapper_run(w.w, q.get(), kv.get(), kv.get(), o.get(), nullptr, 0, 0, nullptr),
        Contains("run() before plan()"), ATTNJIT_ERROR_NOT_PLANNED);
  }
  SECTION("another operator's function refuses it, naming both operators") {
    t::DLTensorMaker q({8, 128}), k({100, 2, 128}), o({8, 128});
    t::expect_refused(attnjit_single_decode_run(w.w, q.get(), k.get(), k.get(), o.get(), nullptr, nullptr, 0, nullptr),
                      Equals("attnjit_single_decode_run: plan is a batch_decode plan; allowed: a single_decode plan "
                             "from attnjit_single_decode_plan"));
  }
}

TEST_CASE("wrapper create checks its options and the CUDA-graph buffers", "[capi]") {
  t::CRuntime h;
  attnjit_batch_decode_wrapper_options_t o;
  attnjit_batch_decode_wrapper_options_init(&o);
  attnjit_plan_t* w = nullptr;
  t::DLTensorMaker indptr({9}, t::kI32), indices({100}, t::kI32), last({8}, t::kI32);
  auto create = [&](DLTensor* a, DLTensor* b, DLTensor* c) {
    const attnjit_status_t s =
        attnjit_batch_decode_wrapper_create(h.rt, t::fake_device_pointer(), 1 << 20, &o, a, b, c, &w);
    if (s == ATTNJIT_OK) attnjit_plan_destroy(w);
    return s;
  };
  SECTION("struct_size never set") {
    o.struct_size = 0;
    t::expect_refused(create(nullptr, nullptr, nullptr),
                      Contains("options->struct_size=0 is not a size this library knows"));
    CHECK_THAT(t::c_last_error(), Contains("call attnjit_batch_decode_wrapper_options_init first"));
  }
  SECTION("enum, flag and device values") {
    o.kv_layout = 2;
    t::expect_refused(create(nullptr, nullptr, nullptr),
                      Equals("options->kv_layout=2 is not a layout; allowed: 0 (NHD), 1 (HND)"));
    o.kv_layout = ATTNJIT_KV_LAYOUT_HND;
    o.use_tensor_cores = 2;
    t::expect_refused(create(nullptr, nullptr, nullptr),
                      Equals("options->use_tensor_cores=2 is not a flag; allowed: 0, 1"));
    o.use_tensor_cores = 1;
    o.device = -1;
    t::expect_refused(create(nullptr, nullptr, nullptr), Contains("options->device=-1 is not allowed"));
  }
  SECTION("buffers without CUDA-graph mode are refused, not ignored") {
    t::expect_refused(create(indptr.get(), nullptr, nullptr),
                      Contains("paged_kv_indptr_buffer: is given but options->use_cuda_graph=0"));
  }
  SECTION("CUDA-graph mode") {
    o.use_cuda_graph = 1;
    CHECK(create(indptr.get(), indices.get(), last.get()) == ATTNJIT_OK);
    t::expect_refused(create(indptr.get(), nullptr, last.get()),
                      Equals("paged_kv_indices_buffer: is NULL; expected a DLTensor* of int32"));
    indices.dtype(t::kI64);
    t::expect_refused(
        create(indptr.get(), indices.get(), last.get()),
        Contains("paged_kv_indices_buffer: dtype (code=0 kDLInt, bits=64, lanes=1) is not allowed; allowed: int32"));
    indices.dtype(t::kI32);
    last.device({kDLCPU, 0});
    t::expect_refused(create(indptr.get(), indices.get(), last.get()),
                      Contains("paged_kv_last_page_len_buffer: device_type=1 (kDLCPU) is not allowed"));
    last = t::DLTensorMaker({7}, t::kI32);
    t::expect_refused(create(indptr.get(), indices.get(), last.get()),
                      Contains("paged_kv_last_page_len_buffer: 7 entries and paged_kv_indptr_buffer: 9"));
    last = t::DLTensorMaker({8}, t::kI32, {kDLCUDA, 1});
    t::expect_refused(create(indptr.get(), indices.get(), last.get()),
                      Contains("paged_kv_last_page_len_buffer: device cuda:1 differs from options->device=0"));
  }
}

TEST_CASE("wrapper plan checks the host page table and its options before any device work", "[capi]") {
  t::CRuntime h;
  WrapperHandle w(h.rt);
  attnjit_batch_decode_plan_options_t o;
  attnjit_batch_decode_plan_options_init(&o);
  t::HostInts indptr({0, 2, 3}), indices({4, 1, 7}), last({16, 5});
  auto plan = [&](int page_size = 16) {
    return attnjit_batch_decode_wrapper_plan(w.w, indptr.t.get(), indices.t.get(), last.t.get(), 8, 2, 128,
                                             page_size, &o, nullptr);
  };
  SECTION("the page table must be in host memory") {
    indptr.t.device({kDLCUDA, 0});
    t::expect_refused(plan(),
                      Contains("indptr: device_type=2 (kDLCUDA) is not allowed; allowed: kDLCPU or kDLCUDAHost"));
  }
  SECTION("int32, 1-D, contiguous") {
    indices.t.dtype(t::kI64);
    t::expect_refused(plan(), Contains("indices: dtype (code=0 kDLInt, bits=64, lanes=1) is not allowed"));
    indices.t.dtype(t::kI32).strides({2});
    t::expect_refused(plan(), Contains("indices: strides [2] are not allowed for shape [3]; allowed: contiguous"));
  }
  SECTION("the C++ page table checks come through, naming the entry") {
    last.values[1] = 17;
    t::expect_refused(plan(), Equals("last_page_len[1]=17 is not allowed; allowed: 1 to page_size=16"));
    last.values[1] = 5;
    indptr.values[2] = 1;  // a step of 0 is a request without KV (allowed); a step back is not
    t::expect_refused(plan(), Contains("indptr[2]=1 is not allowed after indptr[1]=2"));
  }
  SECTION("options") {
    o.struct_size = 3;
    t::expect_refused(plan(), Contains("options->struct_size=3 is not a size this library knows"));
    attnjit_batch_decode_plan_options_init(&o);
    o.pos_encoding_mode = 5;
    t::expect_refused(plan(), Contains("options->pos_encoding_mode=5 is not a positional encoding"));
    o.pos_encoding_mode = 0;
    o.q_data_type = t::kI8;
    t::expect_refused(plan(), Contains("options->q_data_type=(code=0 kDLInt, bits=8, lanes=1) is not supported"));
    o.q_data_type = t::kBF16;
    o.rope_theta = std::numeric_limits<float>::infinity();
    t::expect_refused(plan(), Contains("options->rope_theta=inf is not finite"));
    o.rope_theta = 0;
    o.window_left = -3;
    t::expect_refused(plan(), Contains("options->window_left=-3 is not allowed"));
  }
  SECTION("page_size") {
    t::expect_refused(plan(0), Contains("page_size=0 is not allowed"));
  }
}

TEST_CASE("plan options convert to the C++ plan arguments", "[capi]") {
  attnjit_batch_decode_plan_options_t o;
  attnjit_batch_decode_plan_options_init(&o);
  const auto defaults = attnjit::capi::to_plan_args(&o, 32, 8, 128, 1);
  CHECK(defaults.q_data_type == attnjit::DType::F16);
  CHECK_FALSE(defaults.kv_data_type.has_value());
  CHECK_FALSE(defaults.sm_scale.has_value());
  CHECK(defaults.window_left == -1);
  CHECK((defaults.num_qo_heads == 32 && defaults.num_kv_heads == 8 && defaults.head_dim == 128 &&
         defaults.page_size == 1));
  o.pos_encoding_mode = ATTNJIT_POS_ENCODING_ALIBI;
  o.window_left = 64;
  o.q_data_type = t::kBF16;
  o.kv_data_type = t::kE4M3;
  o.logits_soft_cap = 30.f;
  o.sm_scale = 0.1f;
  const auto a = attnjit::capi::to_plan_args(&o, 32, 8, 128, 16);
  CHECK(a.pos_encoding_mode == attnjit::PosEncoding::Alibi);
  CHECK(a.window_left == 64);
  CHECK(a.q_data_type == attnjit::DType::BF16);
  CHECK(a.kv_data_type == attnjit::DType::E4M3);
  CHECK(a.logits_soft_cap == 30.f);
  CHECK(a.sm_scale == 0.1f);
  CHECK_FALSE(a.rope_theta.has_value());
  CHECK(attnjit::capi::to_plan_args(nullptr, 1, 1, 64, 16).q_data_type == attnjit::DType::F16);
}

TEST_CASE("wrapper run checks scales and the KV cache forms", "[capi]") {
  t::CRuntime h;
  WrapperHandle w(h.rt);
  t::DLTensorMaker q({1, 8, 128}), kv5({4, 2, 16, 2, 128}), o({1, 8, 128});
  t::expect_refused(
      attnjit_batch_decode_wrapper_run(w.w, q.get(), kv5.get(), nullptr, o.get(), nullptr, -1.f, 0, nullptr),
      Contains("k_scale=-1 is not allowed; allowed: a finite value > 0"));
  t::expect_refused(
      attnjit_batch_decode_wrapper_run(w.w, q.get(), kv5.get(), nullptr, o.get(), nullptr, 0, std::nanf(""), nullptr),
      Contains("v_scale=nan is not allowed"));
  t::DLTensorMaker kv4({4, 16, 2, 128});
  t::expect_refused(attnjit_batch_decode_wrapper_run(w.w, q.get(), kv4.get(), nullptr, o.get(), nullptr, 0, 0, nullptr),
                    Contains("kv_cache: ndim=4 is not allowed with v_cache NULL; allowed: 5"));
  t::DLTensorMaker kv3({4, 3, 16, 2, 128});
  t::expect_refused(attnjit_batch_decode_wrapper_run(w.w, q.get(), kv3.get(), nullptr, o.get(), nullptr, 0, 0, nullptr),
                    Contains("kv_cache: shape [4, 3, 16, 2, 128] is not allowed; shape[1] must be 2"));
}

TEST_CASE("the 5-D cache splits into K and V views without a copy", "[capi]") {
  // [pages=4, 2, page_size=16, heads=2, d=128] bf16, compact: V starts one half-page later.
  t::DLTensorMaker kv({4, 2, 16, 2, 128}, t::kBF16);
  kv.byte_offset(512);
  const auto [k, v] = attnjit::capi::kv_cache_views(kv.get(), nullptr);
  const int64_t half = 16 * 2 * 128;
  CHECK(k.ndim == 4);
  CHECK((k.shape == std::array<int64_t, 4>{4, 16, 2, 128}));
  CHECK((k.strides == std::array<int64_t, 4>{2 * half, 256, 128, 1}));
  CHECK(v.shape == k.shape);
  CHECK(v.strides == k.strides);
  auto* base = static_cast<char*>(t::fake_device_pointer()) + 512;
  CHECK(k.data == base);
  CHECK(v.data == base + half * 2);
  CHECK(k.dtype == attnjit::DType::BF16);

  // Explicit strides (a view of a bigger cache) are kept.
  t::DLTensorMaker strided({4, 2, 16, 2, 128}, t::kF16);
  strided.strides({100000, 50000, 256, 128, 1});
  const auto [k2, v2] = attnjit::capi::kv_cache_views(strided.get(), nullptr);
  CHECK(k2.strides[0] == 100000);
  CHECK(static_cast<char*>(v2.data) - static_cast<char*>(k2.data) == 50000 * 2);

  t::DLTensorMaker host({4, 2, 16, 2, 128}, t::kF16, {kDLCPU, 0});
  CHECK_THROWS_WITH(attnjit::capi::kv_cache_views(host.get(), nullptr),
                    Contains("kv_cache[:, 0] (K): device_type=1 (kDLCPU) is not supported"));
}

TEST_CASE("host index arrays are copied from their byte offset", "[capi]") {
  std::vector<int32_t> values{9, 9, 3, 1, 4};
  t::DLTensorMaker t({3}, t::kI32, {kDLCUDAHost, 0});
  t.data(values.data()).byte_offset(8);
  CHECK((attnjit::capi::host_int32_array(t.get(), "indptr") == std::vector<int32_t>{3, 1, 4}));
  t::DLTensorMaker empty({0}, t::kI32, {kDLCPU, 0});
  empty.data(nullptr);
  CHECK(attnjit::capi::host_int32_array(empty.get(), "indices").empty());
  CHECK_THROWS_WITH(attnjit::capi::host_int32_array(nullptr, "indptr"), Contains("indptr: is NULL"));
}

TEST_CASE("trtllm checks its options, block tables and lengths", "[capi]") {
  t::CRuntime h;
  t::TrtllmInputs in;
  SECTION("scales") {
    in.options.bmm1_scale = 0.f;
    t::expect_refused(in.call(h.rt),
                      Equals("options->bmm1_scale=0 is not allowed; allowed: a finite value > 0 (default 1.0)"));
    in.options.bmm1_scale = 1.f;
    in.options.bmm2_scale = std::numeric_limits<float>::infinity();
    t::expect_refused(in.call(h.rt), Contains("options->bmm2_scale=inf is not allowed"));
  }
  SECTION("struct_size and flags") {
    in.options.struct_size = 0;
    t::expect_refused(in.call(h.rt), Contains("call attnjit_trtllm_decode_options_init first"));
    attnjit_trtllm_decode_options_init(&in.options);
    in.options.uses_shared_paged_kv_idx = 7;
    t::expect_refused(in.call(h.rt), Equals("options->uses_shared_paged_kv_idx=7 is not a flag; allowed: 0, 1"));
  }
  SECTION("query rank") {
    in.query = t::DLTensorMaker({8, 128});
    t::expect_refused(in.call(h.rt),
                      Contains("query: ndim=2 is not allowed; allowed: 3, [num_tokens, num_qo_heads, head_dim]"));
  }
  SECTION("block tables") {
    in.tables = t::DLTensorMaker({3, 4}, t::kI32);
    t::expect_refused(in.call(h.rt),
                      Equals("block_tables: shape [3, 4] is not allowed; allowed: [batch_size, max_pages] "
                             "(batch_size=2 from the query)"));
    in.options.uses_shared_paged_kv_idx = 0;
    in.tables = t::DLTensorMaker({2, 4}, t::kI32);
    t::expect_refused(in.call(h.rt), Contains("allowed: [batch_size, 2, max_pages] (uses_shared_paged_kv_idx=0)"));
    in.tables = t::DLTensorMaker({2, 4}, t::kI32, {kDLCPU, 0});
    in.options.uses_shared_paged_kv_idx = 1;
    t::expect_refused(in.call(h.rt), Contains("block_tables: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA"));
    in.tables = t::DLTensorMaker({2, 4}, t::kU32);
    t::expect_refused(in.call(h.rt),
                      Contains("block_tables: dtype (code=1 kDLUInt, bits=32, lanes=1) is not allowed; allowed: int32 "
                               "(kDLInt, 32)"));
    in.tables = t::DLTensorMaker({2, 4}, t::kI32, {kDLCUDA, 1});
    t::expect_refused(in.call(h.rt), Contains("block_tables: device cuda:1 differs from the query's device cuda:0"));
    in.tables = t::DLTensorMaker({2, 4}, t::kI32);
    in.tables.data(t::fake_device_pointer()).byte_offset(2);  // the kernels load whole int32s
    t::expect_refused(in.call(h.rt), StartsWith("block_tables: address "));
    CHECK_THAT(t::c_last_error(), Contains("is not allowed; allowed: a multiple of 4 bytes (the element size)"));
  }
  SECTION("seq_lens") {
    in.lens = t::DLTensorMaker({2}, t::kF32);
    t::expect_refused(in.call(h.rt),
                      Contains("seq_lens: dtype (code=2 kDLFloat, bits=32, lanes=1) is not allowed; allowed: int32 "
                               "(kDLInt, 32) or uint32 (kDLUInt, 32)"));
    in.lens = t::DLTensorMaker({3}, t::kI32);
    t::expect_refused(in.call(h.rt),
                      Contains("seq_lens: shape [3] is not allowed; allowed: [batch_size] with batch_size=2"));
  }
  SECTION("max_seq_len, and the C++ capacity check behind it") {
    in.lens = t::DLTensorMaker({2}, t::kU32);  // TensorRT-LLM's uint32 is accepted
    in.max_seq_len = 0;
    t::expect_refused(in.call(h.rt), Equals("max_seq_len=0 is not allowed; allowed: >= 1"));
    in.max_seq_len = 65;
    t::expect_refused(in.call(h.rt), Contains("max_seq_len=65 is not allowed; block_tables hold 4 pages of 16 rows"));
  }
  SECTION("the 5-D cache form") {
    t::DLTensorMaker kv5({10, 3, 2, 16, 128});
    in.k = kv5;
    t::expect_refused(in.call(h.rt, nullptr),
                      Contains("kv_cache: shape [10, 3, 2, 16, 128] is not allowed; shape[1] must be 2"));
  }
}

TEST_CASE("cudnn checks scale, its arrays and its two-tensor cache", "[capi]") {
  t::CRuntime h;
  CudnnInputs in;
  SECTION("v_cache is required") {
    CHECK(attnjit_cudnn_batch_decode_with_kv_cache(h.rt, in.q.get(), in.k.get(), nullptr, in.scale,
                                                   t::fake_device_pointer(), 1 << 20, 64, in.lens.get(),
                                                   in.tables.get(), in.out.get(), nullptr) ==
          ATTNJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(t::c_last_error(), Contains("attnjit_cudnn_batch_decode_with_kv_cache: v_cache is NULL"));
  }
  SECTION("scale") {
    in.scale = std::nanf("");
    t::expect_refused(in.call(h.rt), Contains("scale=nan is not allowed; allowed: a finite value > 0"));
  }
  SECTION("lengths of cuDNN's [batch, 1, 1, 1] shape pass, others do not") {
    in.lens = t::DLTensorMaker({2, 1, 1, 1}, t::kI32);
    in.max_sequence_kv = 65;  // past the capacity: the first error after the C checks
    t::expect_refused(in.call(h.rt),
                      Contains("max_sequence_kv=65 is not allowed; block_tables hold 4 pages of 16 rows"));
    in.lens = t::DLTensorMaker({2, 2}, t::kI32);
    t::expect_refused(in.call(h.rt), Contains("actual_seq_lens_kv: shape [2, 2] is not allowed"));
  }
  SECTION("max_sequence_kv") {
    in.max_sequence_kv = -4;
    t::expect_refused(in.call(h.rt), Equals("max_sequence_kv=-4 is not allowed; allowed: >= 1"));
  }
  SECTION("block tables with a row stride are refused") {
    in.tables.strides({8, 1});
    t::expect_refused(in.call(h.rt), Contains("block_tables: strides [8, 1] are not allowed for shape [2, 4]"));
  }
}

TEST_CASE("cudnn _v2 checks batch_offsets_q and batch_offsets_o, naming them", "[capi]") {
  t::CRuntime h;
  CudnnInputs in;  // q [2, 8, 128] on cuda:0: batch_size 2
  // Past every C check the C++ call refuses max_sequence_kv=65 (4 pages of
  // 16): reaching that error shows the offsets were accepted.
  in.max_sequence_kv = 65;
  const std::string past_the_c_checks = "max_sequence_kv=65 is not allowed; block_tables hold 4 pages of 16 rows";
  t::DLTensorMaker per_request({2}, t::kI32), cumulative({3}, t::kI32);

  SECTION("[batch_size] and cuDNN's cumulative [batch_size + 1] get through, each alone or both") {
    for (t::DLTensorMaker* offsets : {&per_request, &cumulative}) {
      t::expect_refused(in.call_v2(h.rt, offsets->get(), nullptr), Contains(past_the_c_checks));
      t::expect_refused(in.call_v2(h.rt, nullptr, offsets->get()), Contains(past_the_c_checks));
    }
    t::expect_refused(in.call_v2(h.rt, per_request.get(), cumulative.get()), Contains(past_the_c_checks));
    cumulative.strides({1});  // an explicit unit stride is contiguous too
    t::expect_refused(in.call_v2(h.rt, cumulative.get(), per_request.get()), Contains(past_the_c_checks));
  }
  SECTION("the first entry point, and _v2 with NULL offsets, get as far as before") {
    t::expect_refused(in.call(h.rt), Contains(past_the_c_checks));
    t::expect_refused(in.call_v2(h.rt, nullptr, nullptr), Contains(past_the_c_checks));
    // A bad offsets tensor cannot reach the first entry point: it has no such parameter.
    in.max_sequence_kv = 0;
    t::expect_refused(in.call(h.rt), Equals("max_sequence_kv=0 is not allowed; allowed: >= 1"));
  }
  SECTION("_v2 names itself in its errors; the first keeps its name") {
    t::expect_refused(in.call_v2(nullptr, per_request.get(), nullptr),
                      Contains("attnjit_cudnn_batch_decode_with_kv_cache_v2: rt is NULL"));
    CHECK(attnjit_cudnn_batch_decode_with_kv_cache_v2(h.rt, in.q.get(), in.k.get(), nullptr, in.scale,
                                                      t::fake_device_pointer(), 1 << 20, 64, in.lens.get(),
                                                      in.tables.get(), nullptr, nullptr, in.out.get(), nullptr) ==
          ATTNJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(t::c_last_error(), Contains("attnjit_cudnn_batch_decode_with_kv_cache_v2: v_cache is NULL"));
    t::expect_refused(in.call(nullptr), Contains("attnjit_cudnn_batch_decode_with_kv_cache: rt is NULL"));
  }
  SECTION("dtype: int32 only") {
    t::DLTensorMaker wide({2}, t::kI64), unsigned32({2}, t::kU32), floats({2}, t::kF32);
    t::expect_refused(in.call_v2(h.rt, wide.get(), nullptr),
                      Equals("batch_offsets_q: dtype (code=0 kDLInt, bits=64, lanes=1) is not allowed; allowed: int32 "
                             "(kDLInt, 32)"));
    t::expect_refused(in.call_v2(h.rt, nullptr, unsigned32.get()),
                      Equals("batch_offsets_o: dtype (code=1 kDLUInt, bits=32, lanes=1) is not allowed; allowed: int32 "
                             "(kDLInt, 32)"));
    t::expect_refused(in.call_v2(h.rt, floats.get(), nullptr),
                      Contains("batch_offsets_q: dtype (code=2 kDLFloat, bits=32, lanes=1) is not allowed"));
  }
  SECTION("length: batch_size or batch_size + 1") {
    for (int64_t n : {0, 1, 4}) {
      INFO("length " << n);
      t::DLTensorMaker offsets({n}, t::kI32);
      CHECK(in.call_v2(h.rt, offsets.get(), nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
      CHECK_THAT(t::c_last_error(), Equals("batch_offsets_q: shape [" + std::to_string(n) +
                                      "] is not allowed; allowed: [batch_size] or [batch_size + 1] (cuDNN's "
                                      "cumulative form) with batch_size=2 from the query"));
      t::expect_refused(in.call_v2(h.rt, nullptr, offsets.get()),
                        Contains("batch_offsets_o: shape [" + std::to_string(n) + "] is not allowed"));
    }
  }
  SECTION("rank: 1-D only") {
    t::DLTensorMaker column({2, 1}, t::kI32), row({1, 3}, t::kI32), scalar({}, t::kI32);
    t::expect_refused(in.call_v2(h.rt, column.get(), nullptr),
                      Equals("batch_offsets_q: shape [2, 1] is not allowed; allowed: [batch_size] or [batch_size + 1] "
                             "(cuDNN's cumulative form) with batch_size=2 from the query"));
    t::expect_refused(in.call_v2(h.rt, nullptr, row.get()), Contains("batch_offsets_o: shape [1, 3] is not allowed"));
    t::expect_refused(in.call_v2(h.rt, scalar.get(), nullptr), Contains("batch_offsets_q: ndim=0"));
  }
  SECTION("device: the query's CUDA device") {
    per_request.device({kDLCPU, 0});
    t::expect_refused(in.call_v2(h.rt, per_request.get(), nullptr),
                      Equals("batch_offsets_q: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA (it is read by "
                             "the kernel)"));
    cumulative.device({kDLCUDA, 1});
    t::expect_refused(
        in.call_v2(h.rt, nullptr, cumulative.get()),
        Equals("batch_offsets_o: device cuda:1 differs from the query's device cuda:0; they must be equal"));
  }
  SECTION("contiguity, data and alignment") {
    cumulative.strides({2});
    t::expect_refused(
        in.call_v2(h.rt, cumulative.get(), nullptr),
        Equals("batch_offsets_q: strides [2] are not allowed for shape [3]; allowed: contiguous (row-major)"));
    per_request.data(nullptr);
    t::expect_refused(in.call_v2(h.rt, nullptr, per_request.get()), Equals("batch_offsets_o: data is NULL"));
    per_request.data(t::fake_device_pointer()).byte_offset(2);
    t::expect_refused(in.call_v2(h.rt, nullptr, per_request.get()), StartsWith("batch_offsets_o: address "));
    CHECK_THAT(t::c_last_error(), Contains("is not allowed; allowed: a multiple of 4 bytes (the element size)"));
  }
  SECTION("order: the arrays before them, then batch_offsets_q, then batch_offsets_o") {
    t::DLTensorMaker wide({2}, t::kI64), short_one({1}, t::kI32);
    t::expect_refused(in.call_v2(h.rt, short_one.get(), wide.get()),
                      StartsWith("batch_offsets_q: shape [1] is not allowed"));
    in.tables = t::DLTensorMaker({3, 4}, t::kI32);
    t::expect_refused(in.call_v2(h.rt, short_one.get(), wide.get()),
                      StartsWith("block_tables: shape [3, 4] is not allowed"));
  }
  SECTION("batch_size comes from q") {
    in.q = t::DLTensorMaker({3, 8, 128});
    in.out = t::DLTensorMaker({3, 8, 128});
    in.lens = t::DLTensorMaker({3}, t::kI32);
    in.tables = t::DLTensorMaker({3, 4}, t::kI32);
    t::DLTensorMaker four({4}, t::kI32), five({5}, t::kI32);
    t::expect_refused(in.call_v2(h.rt, four.get(), per_request.get()),
                      Equals("batch_offsets_o: shape [2] is not allowed; allowed: [batch_size] or [batch_size + 1] "
                             "(cuDNN's cumulative form) with batch_size=3 from the query"));
    t::expect_refused(in.call_v2(h.rt, five.get(), nullptr), Contains("batch_offsets_q: shape [5] is not allowed"));
    t::expect_refused(in.call_v2(h.rt, four.get(), cumulative.get()), Contains(past_the_c_checks));
  }
}

TEST_CASE("trtllm _v2 checks enable_pdl and the sinks tensor, naming them", "[capi]") {
  t::CRuntime h;
  t::TrtllmInputs in;
  // Past every C check the C++ call refuses max_seq_len=65 (4 pages of 16):
  // reaching that error shows the sinks and enable_pdl were accepted.
  in.max_seq_len = 65;
  const std::string past_the_c_checks = "max_seq_len=65 is not allowed; block_tables hold 4 pages of 16 rows";
  t::DLTensorMaker sinks({8}, t::kF32);  // query [2, 8, 128]: 8 qo heads on cuda:0

  SECTION("valid sinks and each enable_pdl value get through") {
    for (int pdl : {-1, 0, 1}) {
      INFO("enable_pdl=" << pdl);
      t::expect_refused(in.call_v2(h.rt, sinks.get(), pdl), Contains(past_the_c_checks));
      t::expect_refused(in.call_v2(h.rt, nullptr, pdl), Contains(past_the_c_checks));
    }
    sinks.strides({1});  // explicit unit stride is contiguous too
    t::expect_refused(in.call_v2(h.rt, sinks.get(), -1), Contains(past_the_c_checks));
  }
  SECTION("enable_pdl outside -1, 0, 1, before any tensor is looked at") {
    in.query = t::DLTensorMaker({8, 128});  // would be refused too, later
    t::expect_refused(in.call_v2(h.rt, nullptr, 2),
                      Equals("enable_pdl=2 is not allowed; allowed: -1 (the library's default: on for sm_90 and "
                             "newer), 0 (off), 1 (on)"));
  }
  SECTION("sinks dtype") {
    sinks.dtype(t::kF16);
    t::expect_refused(
        in.call_v2(h.rt, sinks.get(), -1),
        Equals("sinks: dtype (code=2 kDLFloat, bits=16, lanes=1) is not allowed; allowed: float32 (kDLFloat, 32)"));
    sinks.dtype(t::kI32);
    t::expect_refused(in.call_v2(h.rt, sinks.get(), -1),
                      Contains("sinks: dtype (code=0 kDLInt, bits=32, lanes=1) is not allowed"));
  }
  SECTION("sinks shape: one entry per query head") {
    t::DLTensorMaker four({4}, t::kF32), column({8, 1}, t::kF32);
    t::expect_refused(
        in.call_v2(h.rt, four.get(), -1),
        Equals("sinks: shape [4] is not allowed; allowed: [num_qo_heads] with num_qo_heads=8 from the query"));
    t::expect_refused(in.call_v2(h.rt, column.get(), -1), Contains("sinks: shape [8, 1] is not allowed"));
    column.no_shape();
    t::expect_refused(in.call_v2(h.rt, column.get(), -1), Contains("sinks: shape NULL (ndim=2) is not allowed"));
  }
  SECTION("sinks device") {
    sinks.device({kDLCPU, 0});
    t::expect_refused(
        in.call_v2(h.rt, sinks.get(), -1),
        Equals("sinks: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA (it is read by the kernel)"));
    sinks.device({kDLCUDA, 1});
    t::expect_refused(in.call_v2(h.rt, sinks.get(), -1),
                      Equals("sinks: device cuda:1 differs from the query's device cuda:0; they must be equal"));
  }
  SECTION("sinks contiguity, data and alignment") {
    sinks.strides({2});
    t::expect_refused(in.call_v2(h.rt, sinks.get(), -1),
                      Equals("sinks: strides [2] are not allowed for shape [8]; allowed: contiguous (stride 1)"));
    sinks = t::DLTensorMaker({8}, t::kF32);
    sinks.data(nullptr);
    t::expect_refused(in.call_v2(h.rt, sinks.get(), -1), Equals("sinks: data is NULL for 8 elements"));
    sinks.data(t::fake_device_pointer()).byte_offset(2);
    t::expect_refused(in.call_v2(h.rt, sinks.get(), -1),
                      Contains("is not allowed; allowed: a multiple of 4 bytes (the element size)"));
  }
  SECTION("the tensors before it are checked first") {
    sinks.dtype(t::kF16);
    in.out = t::DLTensorMaker({2, 8, 128}, t::kF16, {kDLCPU, 0});
    t::expect_refused(in.call_v2(h.rt, sinks.get(), -1), Contains("out: device_type=1 (kDLCPU) is not supported"));
  }
  SECTION("the first entry point still gets through; _v2 names itself in its errors") {
    t::expect_refused(in.call(h.rt), Contains(past_the_c_checks));
    CHECK(attnjit_trtllm_batch_decode_with_kv_cache_v2(nullptr, in.query.get(), in.k.get(), in.v.get(), nullptr, 0,
                                                       in.tables.get(), in.lens.get(), 64, nullptr, nullptr, -1,
                                                       in.out.get(), nullptr, nullptr) ==
          ATTNJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(t::c_last_error(), Contains("attnjit_trtllm_batch_decode_with_kv_cache_v2: rt is NULL"));
  }
}

TEST_CASE("the TensorRT-LLM options struct keeps the size callers were built with", "[capi]") {
  // sinks and enable_pdl are parameters of _v2, not fields appended to the
  // options: the init function writes sizeof of the library's struct.
  CHECK(sizeof(attnjit_trtllm_decode_options_t) == 28);
  CHECK(offsetof(attnjit_trtllm_decode_options_t, bmm2_scale) == 24);
}

// The C API of single prefill on the CPU: option defaults, and bad options or
// problems rejected with messages naming the C parameter, before any device
// is needed.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_batch_prefill.h"
#include "support/dltensor_maker.hpp"

using attnjit::test::DLTensorMaker;

namespace {

struct Runtime {
  attnjit_runtime_t* rt = nullptr;
  Runtime() { REQUIRE(attnjit_runtime_create(&rt) == ATTNJIT_OK); }
  ~Runtime() { attnjit_runtime_destroy(rt); }
};

}  // namespace

TEST_CASE("C API: prefill options start at FlashInfer's defaults", "[capi][prefill]") {
  attnjit_prefill_options_t o;
  attnjit_prefill_options_init(&o);
  CHECK(o.struct_size == sizeof(attnjit_prefill_options_t));
  CHECK(o.causal == 0);
  CHECK(o.kv_layout == ATTNJIT_KV_LAYOUT_NHD);
  CHECK(o.pos_encoding_mode == ATTNJIT_POS_ENCODING_NONE);
  CHECK(o.window_left == -1);
  CHECK(o.sm_scale == 0.f);
  CHECK(o.backend == ATTNJIT_PREFILL_BACKEND_AUTO);
  (attnjit_prefill_options_init)(nullptr);  // no crash (the unsized symbol)
  attnjit_prefill_options_init_sized(nullptr, 64);
}

TEST_CASE("C API: single prefill rejects bad options and problems, naming them", "[capi][prefill][errors]") {
  Runtime r;
  DLTensorMaker q({100, 8, 128}), k({50, 2, 128}), v({50, 2, 128}), o({100, 8, 128});
  attnjit_prefill_options_t opts;
  attnjit_prefill_options_init(&opts);
  auto call = [&] {
    return attnjit_single_prefill_with_kv_cache(r.rt, q.get(), k.get(), v.get(), o.get(), nullptr, &opts, nullptr, 0,
                                                nullptr, 0, nullptr);
  };
  opts.causal = 2;
  CHECK(call() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("options->causal=2"));
  opts.causal = 1;  // qo_len 100 > kv_len 50 is allowed (rows that see no key give 0); no KV at all is not
  DLTensorMaker k0({0, 2, 128}), v0({0, 2, 128});
  auto call_no_kv = [&] {
    return attnjit_single_prefill_with_kv_cache(r.rt, q.get(), k0.get(), v0.get(), o.get(), nullptr, &opts, nullptr, 0,
                                                nullptr, 0, nullptr);
  };
  CHECK(call_no_kv() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("kv_len=0 is not allowed"));
  opts.struct_size = 0;
  CHECK(call() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("attnjit_prefill_options_init"));
  attnjit_prefill_options_init(&opts);
  opts.backend = 7;
  CHECK(call() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("options->backend=7") && Catch::Contains("2 (fa3)") &&
                                                    Catch::Contains("3 (fa3_ws)"));
  opts.backend = ATTNJIT_PREFILL_BACKEND_FA3_WS;  // taken: the call fails on the problem, not the backend
  CHECK(call_no_kv() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("kv_len=0 is not allowed"));
  // A caller built against the 0.2 header (no backend field) reads as "auto".
  attnjit_prefill_options_init(&opts);
  opts.backend = 7;
  opts.struct_size = offsetof(attnjit_prefill_options_t, backend);
  opts.causal = 1;
  CHECK(call_no_kv() == ATTNJIT_ERROR_INVALID_ARGUMENT);  // the problem's error, not the backend's
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("kv_len=0 is not allowed"));
  attnjit_prefill_options_init(&opts);
  opts.pos_encoding_mode = 7;
  CHECK(call() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("options->pos_encoding_mode=7"));
  attnjit_prefill_options_init(&opts);
  DLTensorMaker k96({50, 2, 96}), v96({50, 2, 96}), q96({10, 8, 96}), o96({10, 8, 96});
  CHECK(attnjit_single_prefill_with_kv_cache(r.rt, q96.get(), k96.get(), v96.get(), o96.get(), nullptr, &opts, nullptr,
                                             0, nullptr, 0, nullptr) == ATTNJIT_ERROR_UNSUPPORTED);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("head_dim=96"));
  CHECK(attnjit_single_prefill_with_kv_cache(nullptr, q.get(), k.get(), v.get(), o.get(), nullptr, &opts, nullptr, 0,
                                             nullptr, 0, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("C API: single prefill's workspace query checks its arguments like the call", "[capi][prefill][errors]") {
  Runtime r;
  DLTensorMaker q({100, 8, 128}), k({50, 2, 128}), v({50, 2, 128});
  attnjit_prefill_options_t opts;
  attnjit_prefill_options_init(&opts);
  size_t bytes = 7;
  CHECK(attnjit_single_prefill_workspace_bytes(nullptr, q.get(), k.get(), v.get(), &opts, 0, 0, &bytes) ==
        ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(attnjit_single_prefill_workspace_bytes(r.rt, q.get(), k.get(), v.get(), &opts, 0, 0, nullptr) ==
        ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("out"));
  DLTensorMaker k0({0, 2, 128}), v0({0, 2, 128});  // the problem's own errors come before any device is asked
  CHECK(attnjit_single_prefill_workspace_bytes(r.rt, q.get(), k0.get(), v0.get(), &opts, 0, 0, &bytes) ==
        ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("kv_len=0 is not allowed"));
  CHECK(bytes == 7);  // nothing written on failure
}

TEST_CASE("C API: batch prefill handles check their arguments", "[capi][prefill][batch][errors]") {
  Runtime r;
  alignas(256) static char ws[256];
  attnjit_batch_prefill_t* w = nullptr;
  CHECK(attnjit_batch_prefill_create(r.rt, 1, ws, sizeof ws, 5, "auto", 0, &w) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(w == nullptr);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("kv_layout=5"));
  CHECK(attnjit_batch_prefill_create(r.rt, 1, ws, sizeof ws, 0, "fa4", 0, &w) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(w == nullptr);
  REQUIRE(attnjit_batch_prefill_create(r.rt, 1, ws, sizeof ws, 0, nullptr, 0, &w) == ATTNJIT_OK);
  const int32_t qo[] = {0, 4, 8}, pages[] = {0, 1, 2}, ids[] = {0, 1}, last[] = {1, 17};
  attnjit_prefill_options_t o;
  attnjit_prefill_options_init(&o);
  CHECK(attnjit_batch_prefill_plan(w, qo, pages, 2, ids, 2, last, 16, 8, 2, 128, &o, "float16", nullptr, nullptr, 0,
                                   nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("paged_kv_last_page_len[1]=17"));
  CHECK(attnjit_batch_prefill_plan(w, qo, pages, 2, ids, 2, last, 16, 8, 2, 128, &o, "float64", nullptr, nullptr, 0,
                                   nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(attnjit_batch_prefill_plan(w, nullptr, pages, 2, ids, 2, last, 16, 8, 2, 128, &o, "float16", nullptr, nullptr,
                                   0, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("qo_indptr"));
  size_t bytes = 1;
  CHECK(attnjit_batch_prefill_workspace_bytes(w, &bytes) == ATTNJIT_OK);
  CHECK(bytes == 0);  // not planned
  CHECK(attnjit_batch_prefill_destroy(w) == ATTNJIT_OK);
  CHECK(attnjit_batch_prefill_destroy(nullptr) == ATTNJIT_OK);
}

TEST_CASE("C API: batch prefill in CUDA-graph mode checks its fixed buffers", "[capi][prefill][batch][graph][errors]") {
  Runtime r;
  alignas(256) static char ws[256];
  attnjit_batch_prefill_t* w = nullptr;
  const DLDataType i32{kDLInt, 32, 1}, u8{kDLUInt, 8, 1};
  DLTensorMaker qo({3}, i32), kv({3}, i32), ids({16}, i32), last({2}, i32), mask({64}, u8), qk({3}, i32);
  auto create = [&](int paged, int graph, DLTensor* a, DLTensor* b, DLTensor* c, DLTensor* d, DLTensor* e,
                    DLTensor* f) {
    return attnjit_batch_prefill_create_v2(r.rt, paged, ws, sizeof ws, 0, "auto", 0, graph, a, b, c, d, e, f, &w);
  };
  CHECK(create(0, 1, nullptr, kv.get(), nullptr, nullptr, nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("qo_indptr_buf: is NULL"));
  CHECK(create(0, 0, qo.get(), nullptr, nullptr, nullptr, nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("qo_indptr_buf: is given but use_cuda_graph=0"));
  CHECK(create(0, 2, qo.get(), kv.get(), nullptr, nullptr, nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("use_cuda_graph=2"));
  DLTensorMaker kv4({4}, i32);
  CHECK(create(0, 1, qo.get(), kv4.get(), nullptr, nullptr, nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("kv_indptr_buf: 4"));
  DLTensorMaker f32({3}, DLDataType{kDLFloat, 32, 1}), host({3}, i32, DLDevice{kDLCPU, 0});
  CHECK(create(0, 1, f32.get(), kv.get(), nullptr, nullptr, nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("qo_indptr_buf: dtype") && Catch::Contains("int32"));
  CHECK(create(0, 1, host.get(), kv.get(), nullptr, nullptr, nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("kDLCUDA"));
  CHECK(create(1, 1, qo.get(), kv.get(), nullptr, last.get(), nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("paged_kv_indices_buf: is NULL"));
  CHECK(create(0, 1, qo.get(), kv.get(), ids.get(), nullptr, nullptr, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("ragged wrapper"));
  CHECK(create(0, 1, qo.get(), kv.get(), nullptr, nullptr, mask.get(), nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("mask_indptr_buf: is NULL"));
  CHECK(w == nullptr);
  REQUIRE(create(1, 1, qo.get(), kv.get(), ids.get(), last.get(), mask.get(), qk.get()) == ATTNJIT_OK);
  // A plan past the fixed buffers fails naming them (before any upload).
  const int32_t qo3[] = {0, 1, 2, 3}, pages3[] = {0, 1, 2, 3}, ids3[] = {0, 1, 2}, last3[] = {1, 1, 1};
  attnjit_prefill_options_t o;
  attnjit_prefill_options_init(&o);
  CHECK(attnjit_batch_prefill_plan(w, qo3, pages3, 3, ids3, 3, last3, 16, 8, 2, 128, &o, "float16", nullptr, nullptr,
                                   0, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("max_batch_size=2"));
  CHECK(attnjit_batch_prefill_destroy(w) == ATTNJIT_OK);
}

TEST_CASE("C API: the batch prefill wrapper is an attnjit_plan_t with FlashInfer's memory contract",
          "[capi][prefill][batch][workspace]") {
  Runtime r;
  alignas(256) static char ws[256];
  attnjit_batch_prefill_wrapper_options_t o;
  attnjit_batch_prefill_wrapper_options_init(&o);
  CHECK(o.struct_size == sizeof o);
  CHECK(o.kv_layout == ATTNJIT_KV_LAYOUT_NHD);
  CHECK(o.backend == ATTNJIT_PREFILL_BACKEND_AUTO);
  attnjit_plan_t* w = nullptr;
  auto create = [&] {
    return attnjit_batch_prefill_wrapper_create(r.rt, ws, sizeof ws, &o, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                nullptr, &w);
  };
  o.backend = 7;
  CHECK(create() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("options->backend=7"));
  o.backend = ATTNJIT_PREFILL_BACKEND_FA2;
  o.paged = 2;
  CHECK(create() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("options->paged=2"));
  o.paged = 1;
  o.struct_size = 3;
  CHECK(create() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("attnjit_batch_prefill_wrapper_options_init"));
  o.struct_size = sizeof o;
  REQUIRE(create() == ATTNJIT_OK);
  CHECK(std::string(attnjit_plan_operator(w)) == "batch_prefill");
  size_t bytes = 7;
  CHECK(attnjit_plan_int_workspace_bytes(w, &bytes) == ATTNJIT_OK);
  CHECK(bytes == 0);  // not planned
  // FlashInfer's int_workspace_buffer: refused when NULL or misaligned, by name.
  CHECK(attnjit_plan_set_int_workspace(w, nullptr, 1 << 20) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("buffer"));
  CHECK(attnjit_plan_set_int_workspace(w, ws + 4, 128) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("int_workspace_buffer"));
  CHECK(attnjit_plan_set_int_workspace(w, ws, sizeof ws) == ATTNJIT_OK);

  // Index arrays are host int32 DLTensors; another dtype or a device array is refused by name.
  const DLDataType i32{kDLInt, 32, 1}, i64{kDLInt, 64, 1};
  int32_t qo_data[] = {0, 4, 8}, pages_data[] = {0, 1, 2}, ids_data[] = {0, 1}, last_data[] = {1, 17};
  DLTensorMaker qo({3}, i32, {kDLCPU, 0}), pages({3}, i32, {kDLCPU, 0}), ids({2}, i32, {kDLCPU, 0}),
      last({2}, i32, {kDLCPU, 0});
  qo.data(qo_data);
  pages.data(pages_data);
  ids.data(ids_data);
  last.data(last_data);
  attnjit_prefill_options_t po;
  attnjit_prefill_options_init(&po);
  const DLDataType f16{kDLFloat, 16, 1}, none{0, 0, 0};
  auto plan = [&] {
    return attnjit_batch_prefill_wrapper_plan(w, qo.get(), pages.get(), ids.get(), last.get(), 16, 8, 2, 128, &po,
                                              f16, none, nullptr, nullptr);
  };
  CHECK(plan() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("paged_kv_last_page_len[1]=17"));
  last_data[1] = 16;
  qo.dtype(i64);
  CHECK(plan() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("qo_indptr"));
  qo.dtype(i32);
  qo.device({kDLCUDA, 0});
  CHECK(plan() == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("qo_indptr"));
  qo.device({kDLCPU, 0});
  // use_fp16_qk_reduction is refused, not ignored.
  po.allow_fp16_qk_reduction = 1;
  CHECK(plan() == ATTNJIT_ERROR_UNSUPPORTED);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("use_fp16_qk_reduction"));
  po.allow_fp16_qk_reduction = 0;
  // A ragged call's paged arrays, and a run of a plan of another operator, are refused by name.
  CHECK(attnjit_batch_prefill_wrapper_run(w, nullptr, nullptr, nullptr, nullptr, nullptr, 0.f, 0.f, nullptr) ==
        ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(attnjit_plan_destroy(w) == ATTNJIT_OK);
}

TEST_CASE("C API: plans without plan memory refuse an int workspace, naming their operator",
          "[capi][workspace]") {
  Runtime r;
  DLTensorMaker q({8, 128}), k({1000, 2, 128}), v({1000, 2, 128});
  attnjit_decode_options_t opts;
  attnjit_decode_options_init(&opts);
  attnjit_plan_t* p = nullptr;
  // Planning single decode compiles nothing without a device here; a NULL plan handle is enough to test the generics.
  alignas(256) static char buf[256];
  CHECK(attnjit_plan_set_int_workspace(nullptr, buf, sizeof buf) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("plan"));
  size_t bytes = 3;
  CHECK(attnjit_plan_int_workspace_bytes(nullptr, &bytes) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK(bytes == 3);
  if (attnjit_single_decode_plan(r.rt, q.get(), k.get(), v.get(), &opts, 0, &p) != ATTNJIT_OK) return;  // no device
  CHECK(attnjit_plan_set_int_workspace(p, buf, sizeof buf) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Catch::Contains("single_decode plan keeps no plan memory"));
  CHECK(attnjit_plan_int_workspace_bytes(p, &bytes) == ATTNJIT_OK);
  CHECK(bytes == 0);
  attnjit_plan_destroy(p);
}

// The wrappers' workspace-size queries (attnjit_batch_decode_wrapper_workspace_bytes,
// attnjit_batch_prefill_wrapper_workspace_bytes) without a GPU: their NULL
// out pointers and handles of another operator are refused by name, and for
// bad arguments they fail with the plan call's status and message, so a
// caller cannot size a workspace for a plan that plan() then refuses. The
// sizes themselves need the device's figures: tests/workspace/gpu_size_test.cpp.
#include "support/trtllm_c_inputs.hpp"  // first: includes dlpack through the compat shim

#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_batch_decode.h"
#include "attnjit/attnjit_batch_prefill.h"

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
namespace t = attnjit::test;

namespace {

// Both calls fail alike: the same status and the same message.
void same_failure(const std::function<attnjit_status_t()>& plan, const std::function<attnjit_status_t()>& query,
                  attnjit_status_t status, const std::string& contains) {
  CHECK(plan() == status);
  const std::string planned = attnjit_last_error();
  CHECK_THAT(planned, Contains(contains));
  CHECK(query() == status);
  CHECK_THAT(std::string(attnjit_last_error()), Equals(planned));
}

}  // namespace

TEST_CASE("batch decode's workspace query fails as its plan does, before any device work", "[capi][workspace_size]") {
  t::CRuntime h;
  attnjit_plan_t* w = nullptr;
  REQUIRE(attnjit_batch_decode_wrapper_create(h.rt, t::fake_device_pointer(), 128 << 20, nullptr, nullptr, nullptr,
                                              nullptr, &w) == ATTNJIT_OK);
  attnjit_batch_decode_plan_options_t o;
  attnjit_batch_decode_plan_options_init(&o);
  t::HostInts indptr({0, 2, 3}), indices({4, 1, 7}), last({16, 5});
  size_t float_bytes = 7, int_bytes = 7;
  int page_size = 16;
  auto plan = [&] {
    return attnjit_batch_decode_wrapper_plan(w, indptr.t.get(), indices.t.get(), last.t.get(), 8, 2, 128, page_size,
                                             &o, nullptr);
  };
  auto query = [&] {
    return attnjit_batch_decode_wrapper_workspace_bytes(w, indptr.t.get(), indices.t.get(), last.t.get(), 8, 2, 128,
                                                        page_size, &o, &float_bytes, &int_bytes);
  };
  SECTION("NULL out pointers are named") {
    CHECK(attnjit_batch_decode_wrapper_workspace_bytes(w, indptr.t.get(), indices.t.get(), last.t.get(), 8, 2, 128, 16,
                                                       &o, nullptr, &int_bytes) == ATTNJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(std::string(attnjit_last_error()), Contains("float_workspace_bytes"));
    CHECK(attnjit_batch_decode_wrapper_workspace_bytes(w, indptr.t.get(), indices.t.get(), last.t.get(), 8, 2, 128, 16,
                                                       &o, &float_bytes, nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(std::string(attnjit_last_error()), Contains("int_workspace_bytes"));
    CHECK(attnjit_batch_decode_wrapper_workspace_bytes(nullptr, indptr.t.get(), indices.t.get(), last.t.get(), 8, 2,
                                                       128, 16, &o, &float_bytes, &int_bytes) ==
          ATTNJIT_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(std::string(attnjit_last_error()), Contains("plan"));
  }
  SECTION("the page table's checks") {
    last.values[1] = 17;
    same_failure(plan, query, ATTNJIT_ERROR_INVALID_ARGUMENT, "last_page_len[1]=17");
    last.values[1] = 5;
    indptr.values[2] = 1;
    same_failure(plan, query, ATTNJIT_ERROR_INVALID_ARGUMENT, "indptr[2]=1 is not allowed after indptr[1]=2");
    indptr.values[2] = 3;
    indices.values[0] = -2;
    same_failure(plan, query, ATTNJIT_ERROR_INVALID_ARGUMENT, "indices[0]=-2");
  }
  SECTION("the arrays' form and the options") {
    indices.t.dtype(t::kI8);
    same_failure(plan, query, ATTNJIT_ERROR_INVALID_ARGUMENT, "indices: dtype");
    indices.t.dtype(t::kI32);
    o.window_left = -3;
    same_failure(plan, query, ATTNJIT_ERROR_INVALID_ARGUMENT, "options->window_left=-3");
    o.window_left = -1;
    page_size = 0;
    same_failure(plan, query, ATTNJIT_ERROR_INVALID_ARGUMENT, "page_size=0");
  }
  CHECK(float_bytes == 7);  // nothing written on failure
  CHECK(int_bytes == 7);
  size_t planned = 9;
  CHECK(attnjit_plan_int_workspace_bytes(w, &planned) == ATTNJIT_OK);
  CHECK(planned == 0);  // the queries planned nothing
  attnjit_plan_destroy(w);
}

TEST_CASE("batch prefill's workspace query fails as its plan does, before any device work",
          "[capi][prefill][workspace_size]") {
  t::CRuntime h;
  alignas(256) static char ws[256];
  attnjit_batch_prefill_wrapper_options_t wo;
  attnjit_batch_prefill_wrapper_options_init(&wo);
  wo.paged = 1;
  attnjit_plan_t* w = nullptr;
  REQUIRE(attnjit_batch_prefill_wrapper_create(h.rt, ws, sizeof ws, &wo, nullptr, nullptr, nullptr, nullptr, nullptr,
                                               nullptr, &w) == ATTNJIT_OK);
  t::HostInts qo({0, 4, 8}), pages({0, 1, 2}), ids({0, 1}), last({1, 17});
  attnjit_prefill_options_t po;
  attnjit_prefill_options_init(&po);
  const DLDataType f16{kDLFloat, 16, 1}, none{0, 0, 0};
  size_t float_bytes = 7, int_bytes = 7;
  auto plan = [&] {
    return attnjit_batch_prefill_wrapper_plan(w, qo.t.get(), pages.t.get(), ids.t.get(), last.t.get(), 16, 8, 2, 128,
                                              &po, f16, none, nullptr, nullptr);
  };
  auto query = [&] {
    return attnjit_batch_prefill_wrapper_workspace_bytes(w, qo.t.get(), pages.t.get(), ids.t.get(), last.t.get(), 16,
                                                         8, 2, 128, &po, f16, none, nullptr, &float_bytes,
                                                         &int_bytes);
  };
  same_failure(plan, query, ATTNJIT_ERROR_INVALID_ARGUMENT, "paged_kv_last_page_len[1]=17");
  last.values[1] = 16;
  qo.t.device({kDLCUDA, 0});
  same_failure(plan, query, ATTNJIT_ERROR_INVALID_ARGUMENT, "qo_indptr");
  qo.t.device({kDLCPU, 0});
  po.allow_fp16_qk_reduction = 1;  // refused, not ignored
  same_failure(plan, query, ATTNJIT_ERROR_UNSUPPORTED, "use_fp16_qk_reduction");
  po.allow_fp16_qk_reduction = 0;
  ids.values[1] = -1;
  same_failure(plan, query, ATTNJIT_ERROR_INVALID_ARGUMENT, "paged_kv_indices[1]=-1");
  CHECK(attnjit_batch_prefill_wrapper_workspace_bytes(w, qo.t.get(), pages.t.get(), ids.t.get(), last.t.get(), 16, 8,
                                                      2, 128, &po, f16, none, nullptr, nullptr, &int_bytes) ==
        ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Contains("float_workspace_bytes"));
  CHECK(float_bytes == 7);
  CHECK(int_bytes == 7);

  // A decode wrapper's handle is not a prefill wrapper's.
  attnjit_plan_t* d = nullptr;
  REQUIRE(attnjit_batch_decode_wrapper_create(h.rt, t::fake_device_pointer(), 1 << 20, nullptr, nullptr, nullptr,
                                              nullptr, &d) == ATTNJIT_OK);
  CHECK(attnjit_batch_prefill_wrapper_workspace_bytes(d, qo.t.get(), pages.t.get(), ids.t.get(), last.t.get(), 16, 8,
                                                      2, 128, &po, f16, none, nullptr, &float_bytes, &int_bytes) ==
        ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()),
             Equals("attnjit_batch_prefill_wrapper_workspace_bytes: plan is a batch_decode plan; allowed: a "
                    "batch_prefill plan from attnjit_batch_prefill_plan"));
  attnjit_plan_destroy(d);
  attnjit_plan_destroy(w);
}

// The device-table checks' host side without a GPU: the record a kernel
// writes (kernels/table_check.h) read back into one sentence per fault and
// entry point, cleared once raised; ATTNJIT_CHECK's parsing; the C functions'
// arguments. The kernels' side runs in tests/table_check/gpu_test.cpp.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <limits>
#include <optional>
#include <string>

#include "attnjit/attnjit.h"
#include "attnjit/config.hpp"
#include "support/error_capture.hpp"
#include "support/scoped_env.hpp"
#include "table_check.hpp"

namespace attnjit::test {

namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using kernels::TableCheckRecord;

TableCheckRecord fault(int32_t what, int32_t names, int32_t side, int64_t index0, int64_t index1, int64_t value,
                       int64_t low, int64_t high) {
  return TableCheckRecord{2, what, names, side, index0, index1, value, low, high};
}

}  // namespace

TEST_CASE("a bad page id is named by the entry point's array, index and value, with the cache's pages",
          "[table_check]") {
  using namespace kernels;
  // TensorRT-LLM's shared table [batch, max_pages], and its [batch, 2, max_pages] form (V's row: side 1).
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPageId, kNamesTrtllm, -1, 3, 7, 1234, 0, 999)),
             Equals("block_tables[3][7]=1234 is not allowed: the cache has 1000 pages (ids 0 to 999)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPageId, kNamesTrtllm, 1, 3, 7, -5, 0, 999)),
             Equals("block_tables[3][1][7]=-5 is not allowed: the cache has 1000 pages (ids 0 to 999)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPageId, kNamesCudnn, -1, 0, 2, 64, 0, 63)),
             Equals("block_tables[0][2]=64 is not allowed: the cache has 64 pages (ids 0 to 63)"));
  // BatchDecodePlan's two arrays.
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPageId, kNamesBlockTable, 0, 1, 4, 70, 0, 63)),
             Contains("k_block_table[1][4]=70 is not allowed"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPageId, kNamesBlockTable, 1, 1, 4, 70, 0, 63)),
             Contains("v_block_table[1][4]=70 is not allowed"));
  // FlashInfer's one-dimensional indices (the wrapper's, the prefill's, the append's).
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPageId, kNamesDecodeWrapper, -1, 17, -1, 5000, 0, 255)),
             Equals("indices[17]=5000 is not allowed: the cache has 256 pages (ids 0 to 255)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPageId, kNamesPrefill, -1, 2, -1, 300, 0, 255)),
             Contains("paged_kv_indices[2]=300 is not allowed"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPageId, kNamesAppend, -1, 9, -1, -1, 0, 255)),
             Contains("kv_indices[9]=-1 is not allowed"));
}

TEST_CASE("a length past the plan's maximum names the length array and the bound by the caller's names",
          "[table_check]") {
  using namespace kernels;
  CHECK_THAT(detail::describe_table_fault(fault(kFaultLength, kNamesTrtllm, -1, 2, -1, 5000, 0, 4096)),
             Equals("seq_lens[2]=5000 is not allowed: allowed 0 to max_seq_len=4096"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultLength, kNamesCudnn, -1, 0, -1, -3, 0, 512)),
             Equals("actual_seq_lens_kv[0]=-3 is not allowed: allowed 0 to max_sequence_kv=512"));
}

TEST_CASE("indptr, last page lengths and an append's rows say what is allowed", "[table_check]") {
  using namespace kernels;
  CHECK_THAT(detail::describe_table_fault(fault(kFaultIndptr, kNamesDecodeWrapper, -1, 4, -1, 90, 12, 40)),
             Equals("indptr[4]=90 is not allowed: allowed 12 to 40 (indptr must not decrease, and indices has 40 "
                    "entries)"));
  // A table of unknown size (a BatchDecodePlan given table_entries 0): only the order is checked.
  CHECK_THAT(detail::describe_table_fault(fault(kFaultIndptr, kNamesDecodePlan, -1, 4, -1, 3, 12,
                                                std::numeric_limits<int64_t>::max())),
             Equals("indptr[4]=3 is not allowed: allowed >= 12 (indptr must not decrease)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultIndptr, kNamesPrefill, -1, 1, -1, -2, 0, 8)),
             Contains("paged_kv_indptr[1]=-2 is not allowed: allowed 0 to 8"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultLastPageLen, kNamesPrefill, -1, 3, -1, 0, 1, 16)),
             Equals("paged_kv_last_page_len[3]=0 is not allowed: allowed 1 to page_size=16"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultLastPageLen, kNamesAppend, -1, 3, -1, 17, 1, 16)),
             Contains("kv_last_page_len[3]=17 is not allowed"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultBatchIndex, kNamesAppend, -1, 5, -1, 9, 0, 3)),
             Equals("batch_indices[5]=9 is not allowed: allowed 0 to 3 (batch_size=4)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPosition, kNamesAppend, -1, 5, 2, 40, 0, 32)),
             Equals("positions[5]=40 is not allowed: its request 2 (batch_indices[5]) has 33 rows (positions 0 to "
                    "32)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultPosition, kNamesAppend, -1, 5, 2, 0, 0, -1)),
             Contains("its request 2 (batch_indices[5]) has no rows"));
}

TEST_CASE("speculative decode's cum_seq_lens_q names the entry, the request and the rows allowed", "[table_check]") {
  using namespace kernels;
  // A request's first entry outside q's 24 rows, and one whose rows run past max_q_len (4) from its first.
  CHECK_THAT(detail::describe_table_fault(fault(kFaultQueryIndptr, kNamesTrtllm, -1, 2, 2, -3, 0, 24)),
             Equals("cum_seq_lens_q[2]=-3 is not allowed: allowed 0 to 24 (request 2's query rows start at "
                    "cum_seq_lens_q[2], number at most max_q_len and end within the query's rows)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultQueryIndptr, kNamesTrtllm, -1, 4, 3, 19, 10, 14)),
             Equals("cum_seq_lens_q[4]=19 is not allowed: allowed 10 to 14 (request 3's query rows start at "
                    "cum_seq_lens_q[3], number at most max_q_len and end within the query's rows)"));
  // The C++ BatchDecodePlan's extras carry the same name.
  CHECK_THAT(detail::describe_table_fault(fault(kFaultQueryIndptr, kNamesBlockTable, -1, 1, 0, 99, 0, 4)),
             Contains("cum_seq_lens_q[1]=99 is not allowed: allowed 0 to 4"));
}

TEST_CASE("batch prefill's qo_indptr and the ragged kv_indptr name the entry, the request and the rows allowed",
          "[table_check]") {
  using namespace kernels;
  // The paged and the ragged wrapper's qo_indptr: a first entry past q's 24 rows, a last one before its first.
  CHECK_THAT(detail::describe_table_fault(fault(kFaultQueryIndptr, kNamesPrefill, -1, 2, 2, 30, 0, 24)),
             Equals("qo_indptr[2]=30 is not allowed: allowed 0 to 24 (request 2's query rows are qo_indptr[2] to "
                    "qo_indptr[3]: qo_indptr must not decrease, and q has 24 rows)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultQueryIndptr, kNamesRaggedPrefill, -1, 4, 3, 5, 10, 24)),
             Equals("qo_indptr[4]=5 is not allowed: allowed 10 to 24 (request 3's query rows are qo_indptr[3] to "
                    "qo_indptr[4]: qo_indptr must not decrease, and q has 24 rows)"));
  // The ragged kv_indptr counts rows of k; the paged one still entries of paged_kv_indices.
  CHECK_THAT(detail::describe_table_fault(fault(kFaultIndptr, kNamesRaggedPrefill, -1, 3, -1, 900, 10, 800)),
             Equals("kv_indptr[3]=900 is not allowed: allowed 10 to 800 (kv_indptr must not decrease, and k has 800 "
                    "rows)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultIndptr, kNamesRaggedPrefill, -1, 0, -1, -1, 0, 800)),
             Contains("kv_indptr[0]=-1 is not allowed: allowed 0 to 800"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultIndptr, kNamesPrefill, -1, 1, -1, 9, 0, 8)),
             Equals("paged_kv_indptr[1]=9 is not allowed: allowed 0 to 8 (paged_kv_indptr must not decrease, and "
                    "paged_kv_indices has 8 entries)"));
}

TEST_CASE("cuDNN's batch offsets name the array, the row, the value and the offsets allowed", "[table_check]") {
  using namespace kernels;
  CHECK_THAT(detail::describe_table_fault(fault(kFaultRowOffset, kNamesCudnn, 0, 2, 8, 4096, 0, 3072)),
             Equals("batch_offsets_q[2]=4096 is not allowed: allowed 0 to 3072 in steps of 8 (row 2 with its heads "
                    "inside q, 16-byte aligned)"));
  CHECK_THAT(detail::describe_table_fault(fault(kFaultRowOffset, kNamesCudnn, 1, 0, 8, 1028, 0, 3072)),
             Equals("batch_offsets_o[0]=1028 is not allowed: allowed 0 to 3072 in steps of 8 (row 0 with its heads "
                    "inside out, 16-byte aligned)"));
  // The C++ BatchDecodeLaunchExtras names them as its fields.
  CHECK_THAT(detail::describe_table_fault(fault(kFaultRowOffset, kNamesBlockTable, 1, 3, 4, -4, 0, 64)),
             Contains("o_row_offsets[3]=-4 is not allowed"));
}

TEST_CASE("a written record is raised once as INVALID_ARGUMENT with where it was found, then cleared",
          "[table_check]") {
  TableCheckRecord r = fault(kernels::kFaultPageId, kernels::kNamesTrtllm, -1, 3, 7, 1234, 0, 999);
  const std::string msg =
      error_of([&] { detail::raise_recorded_fault(r, "the run before this call"); }, Status::InvalidArgument);
  CHECK_THAT(msg, Equals("block_tables[3][7]=1234 is not allowed: the cache has 1000 pages (ids 0 to 999) (found by "
                         "the run before this call)"));
  CHECK(r.state == 0);
  CHECK_NOTHROW(detail::raise_recorded_fault(r, "the next call"));  // cleared: the call after is clean

  // A kernel still writing it (state 1) raises nothing yet; an empty record neither.
  r = fault(kernels::kFaultPageId, kernels::kNamesTrtllm, -1, 3, 7, 1234, 0, 999);
  r.state = 1;
  CHECK_NOTHROW(detail::raise_recorded_fault(r, "x"));
  CHECK(r.state == 1);
  TableCheckRecord empty{};
  CHECK_NOTHROW(detail::raise_recorded_fault(empty, "x"));
}

TEST_CASE("a TableCheck no launch ever used raises nothing and needs no device", "[table_check]") {
  detail::TableCheck check(0);
  CHECK_NOTHROW(check.raise_if_found("x"));
  CHECK_NOTHROW(check.check("x"));  // nothing recorded: no wait either
}

TEST_CASE("ATTNJIT_CHECK is 1 or 0, and anything else names the variable", "[table_check][config]") {
  {
    ScopedEnv e("ATTNJIT_CHECK", nullptr);
    CHECK_FALSE(Config::from_env().check_every_run);
  }
  {
    ScopedEnv e("ATTNJIT_CHECK", "0");
    CHECK_FALSE(Config::from_env().check_every_run);
  }
  {
    ScopedEnv e("ATTNJIT_CHECK", "1");
    CHECK(Config::from_env().check_every_run);
  }
  for (const char* bad : {"yes", "true", "2", " 1"}) {
    ScopedEnv e("ATTNJIT_CHECK", bad);
    const std::string msg = error_of([] { Config::from_env(); }, Status::InvalidArgument);
    CHECK_THAT(msg, Contains(std::string("ATTNJIT_CHECK='") + bad + "' is not a switch; allowed: 1"));
  }
}

TEST_CASE("attnjit_plan_check and attnjit_runtime_check name a NULL handle and a negative device",
          "[table_check][capi]") {
  CHECK(attnjit_plan_check(nullptr) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Contains("attnjit_plan_check: plan is NULL"));
  CHECK(attnjit_runtime_check(nullptr, 0) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Contains("attnjit_runtime_check: rt is NULL"));
  attnjit_runtime_t* rt = nullptr;
  REQUIRE(attnjit_runtime_create(&rt) == ATTNJIT_OK);
  CHECK(attnjit_runtime_check(rt, -1) == ATTNJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(attnjit_last_error()), Contains("device=-1 is not allowed"));
  attnjit_runtime_destroy(rt);
}

}  // namespace attnjit::test

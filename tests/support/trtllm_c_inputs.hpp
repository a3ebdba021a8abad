// The C API's TensorRT-LLM batch decode with made-up device tensors, for the
// CPU tests of its entry points (tests/batch_decode/capi_test.cpp: _v1 and _v2;
// capi_speculative_test.cpp: _v3; capi_tree_mask_test.cpp: _v4): every call
// fails in validation before a plan would need a device.
#pragma once
#include "support/dltensor_maker.hpp"  // first: includes dlpack through the compat shim

#include <catch2/catch.hpp>

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_batch_decode.h"
#include "support/c_runtime.hpp"

namespace attnjit::test {

// Batch 2, 8 qo / 2 kv heads, d 128, HND pages of 16, 4 pages per request.
struct TrtllmInputs {
  DLTensorMaker query{{2, 8, 128}}, k{{10, 2, 16, 128}}, v{{10, 2, 16, 128}}, out{{2, 8, 128}};
  DLTensorMaker tables{{2, 4}, kI32}, lens{{2}, kI32};
  int64_t max_seq_len = 64;
  attnjit_trtllm_decode_options_t options{};
  TrtllmInputs() { attnjit_trtllm_decode_options_init(&options); }
  attnjit_status_t call(attnjit_runtime_t* rt, DLTensor* v_cache) {
    return attnjit_trtllm_batch_decode_with_kv_cache(rt, query.get(), k.get(), v_cache, fake_device_pointer(),
                                                     128 << 20, tables.get(), lens.get(), max_seq_len, &options,
                                                     out.get(), nullptr, nullptr);
  }
  attnjit_status_t call(attnjit_runtime_t* rt) { return call(rt, v.get()); }
  attnjit_status_t call_v2(attnjit_runtime_t* rt, const DLTensor* sinks, int enable_pdl) {
    return attnjit_trtllm_batch_decode_with_kv_cache_v2(rt, query.get(), k.get(), v.get(), fake_device_pointer(),
                                                        128 << 20, tables.get(), lens.get(), max_seq_len, &options,
                                                        sinks, enable_pdl, out.get(), nullptr, nullptr);
  }
  // _v3's own arguments; sinks NULL, enable_pdl -1.
  struct V3 {
    int q_len_per_req = 1;
    int max_q_len = 0;
    const DLTensor* cum_seq_lens_q = nullptr;
    const DLTensor* bmm1_scale = nullptr;
    const DLTensor* bmm2_scale = nullptr;
  };
  attnjit_status_t call_v3(attnjit_runtime_t* rt, const V3& x) {
    return attnjit_trtllm_batch_decode_with_kv_cache_v3(
        rt, query.get(), k.get(), v.get(), fake_device_pointer(), 128 << 20, tables.get(), lens.get(), max_seq_len,
        &options, nullptr, -1, x.q_len_per_req, x.max_q_len, x.cum_seq_lens_q, x.bmm1_scale, x.bmm2_scale,
        out.get(), nullptr, nullptr);
  }
};

}  // namespace attnjit::test

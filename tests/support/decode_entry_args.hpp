// The arguments of batch decode's three entry points for a DevicePagedBatch
// (paged_kv_device.hpp): a BatchDecodePlan's problem and FlashInfer's
// wrapper plan from the shape, and
// TensorRT-LLM's and cuDNN's over its block table and lengths with the softmax
// scale 1/sqrt(d). A test sets what is its own on top (window, sinks, spoiled
// tables).
#pragma once
#include <cmath>

#include "attnjit/batch_decode.hpp"
#include "support/paged_kv_device.hpp"

namespace attnjit::test {

// A BatchDecodePlan's problem for the shape's batch: heads, page size, dtypes
// (out as q) and layout; one query token per request until the caller says.
inline BatchDecodeProblem batch_decode_problem(const PagedBatchShape& s) {
  BatchDecodeProblem p;
  p.batch_size = static_cast<int>(s.lens.size());
  p.num_qo_heads = s.hq;
  p.num_kv_heads = s.hkv;
  p.head_dim = s.d;
  p.page_size = s.page_size;
  p.q_dtype = p.o_dtype = s.q;
  p.kv_dtype = s.kv;
  p.options.kv_layout = s.layout;
  return p;
}

inline BatchDecodeWithPagedKVCacheWrapper::PlanArgs wrapper_plan_args(const PagedBatchShape& s, int window_left) {
  BatchDecodeWithPagedKVCacheWrapper::PlanArgs a;
  a.num_qo_heads = s.hq;
  a.num_kv_heads = s.hkv;
  a.head_dim = s.d;
  a.page_size = s.page_size;
  a.window_left = window_left;
  a.q_data_type = s.q;
  a.kv_data_type = s.kv;
  return a;
}

inline TrtllmDecodeArgs trtllm_args(const DevicePagedBatch& b) {
  TrtllmDecodeArgs a;
  a.block_tables = b.table.as<int32_t>();
  a.max_pages_per_seq = b.max_pages();
  a.seq_lens = b.lens.as<int32_t>();
  a.max_seq_len = b.max_len();
  a.bmm1_scale = 1.f / std::sqrt(float(b.shape.d));
  a.kv_layout = b.shape.layout;
  return a;
}

inline CudnnDecodeArgs cudnn_args(const DevicePagedBatch& b) {
  CudnnDecodeArgs a;
  a.scale = 1.f / std::sqrt(float(b.shape.d));
  a.max_sequence_kv = b.max_len();
  a.actual_seq_lens_kv = b.lens.as<int32_t>();
  a.block_tables = b.table.as<int32_t>();
  a.max_pages_per_seq = b.max_pages();
  return a;
}

}  // namespace attnjit::test

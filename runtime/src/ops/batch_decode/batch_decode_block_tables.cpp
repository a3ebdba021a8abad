// The block-table entry points: TensorRT-LLM's and cuDNN's batch decode. The
// lengths are on the device only, so the partition is the uniform one fixed by
// (batch, max_seq_len): no upload, no sync, one memoized plan per problem, and
// every call graph-capturable.
#include <fmt/format.h>

#include "arch.hpp"
#include "attnjit/batch_decode.hpp"
#include "attnjit/error.hpp"
#include "engine.hpp"
#include "ops/batch_decode/batch_decode_plan_internals.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"
#include "ops/batch_decode/batch_decode_trtllm_batch.hpp"
#include "ops/memoized_plan.hpp"
#include "invalid_argument.hpp"

namespace attnjit {

namespace {

[[noreturn]] void unsupported(const std::string& msg) { throw Error(Status::Unsupported, msg); }

std::shared_ptr<const BatchDecodePlan> memoized_plan(const Runtime& rt, const BatchDecodeProblem& p) {
  return ops::memoized_plan<BatchDecodePlan>(rt, ops::to_json(p).dump(), p);
}

// Shapes from q [batch, H, D] and a 4-D cache in `layout`.
BatchDecodeProblem shape_problem(const TensorView& q, const TensorView& k_cache, const TensorView& v_cache,
                                 KVLayout layout, const char* q_name) {
  if (q.ndim != 3)
    invalid(fmt::format("{}: ndim={} is not allowed; allowed: 3, [batch_size, num_qo_heads, head_dim] (got {})", q_name,
                        q.ndim, q.describe()));
  const bool nhd = layout == KVLayout::NHD;
  const char* want = nhd ? "[pages, page_size, num_kv_heads, head_dim] (NHD)" : "[pages, num_kv_heads, page_size, head_dim] (HND)";
  if (k_cache.ndim != 4)
    invalid(fmt::format("k_cache: ndim={} is not allowed; allowed: 4, {} (got {})", k_cache.ndim, want,
                        k_cache.describe()));
  if (v_cache.ndim != 4 || v_cache.shape != k_cache.shape)
    invalid(fmt::format("v_cache: {} is not allowed; it must have k_cache's shape ({})", v_cache.describe(),
                        k_cache.describe()));
  if (k_cache.shape[3] != q.shape[2])
    invalid(fmt::format("k_cache: head_dim={} differs from {}'s head_dim={}; they must be equal", k_cache.shape[3],
                        q_name, q.shape[2]));
  BatchDecodeProblem p;
  p.batch_size = static_cast<int>(q.shape[0]);
  p.num_qo_heads = static_cast<int>(q.shape[1]);
  p.head_dim = static_cast<int>(q.shape[2]);
  p.num_kv_heads = static_cast<int>(k_cache.shape[nhd ? 2 : 1]);
  p.page_size = static_cast<int>(k_cache.shape[nhd ? 1 : 2]);
  p.page_table = PageTable::BlockTable;
  p.host_lengths = false;
  p.q_dtype = p.o_dtype = q.dtype;
  p.kv_dtype = k_cache.dtype;
  p.device = q.device;
  p.options.kv_layout = layout;
  return p;
}

}  // namespace

void trtllm_batch_decode_with_kv_cache(const Runtime& rt, const TensorView& query, const TensorView& k_cache,
                                       const TensorView& v_cache, void* workspace, size_t workspace_bytes,
                                       const TrtllmDecodeArgs& a, const TensorView& out, const TensorView* lse,
                                       Stream stream) {
  if (a.nvfp4_kv)
    unsupported("kv_cache: NVFP4 KV (with kv_cache_sf / kv_block_scales) is not supported on this architecture; "
                "TensorRT-LLM runs it on Blackwell (sm_100) only. Allowed KV dtypes: float16, bfloat16, "
                "float8_e4m3fn, float8_e5m2");
  if (a.nvfp4_out)
    unsupported("out_dtype=nvfp4 (o_sf_scale / o_sf_vec_size) is not supported on this architecture; TensorRT-LLM "
                "writes NVFP4 output on Blackwell (sm_100) only. Allowed: the query's dtype");
  if (!a.block_tables || !a.seq_lens)
    invalid(fmt::format("{} is null; a device int32 array is required", a.block_tables ? "seq_lens" : "block_tables"));
  if (a.max_pages_per_seq < 1)
    invalid(fmt::format("max_pages_per_seq={} is not allowed; it must be block_tables' last dimension (>= 1)",
                        a.max_pages_per_seq));
  if (!(a.bmm1_scale > 0.f)) invalid(fmt::format("bmm1_scale={} is not allowed; it must be > 0", a.bmm1_scale));
  if (!(a.bmm2_scale > 0.f)) invalid(fmt::format("bmm2_scale={} is not allowed; it must be > 0", a.bmm2_scale));

  BatchDecodeProblem p = shape_problem(query, k_cache, v_cache, a.kv_layout, "query");
  p.batch_size = ops::trtllm_batch_size(a, query);
  p.q_len_per_req = a.q_len_per_req;
  p.max_q_len = a.max_q_len;
  p.draft_mask = a.mask != nullptr;
  p.max_seq_len = a.max_seq_len;
  p.o_dtype = a.out_dtype.value_or(query.dtype);
  // The fused scales: q and k scales and 1/sqrt(d) are in bmm1. A device
  // tensor is a factor the kernel applies to the planned scale, so that is 1.
  p.options.sm_scale = a.bmm1_scale_tensor ? 1.f : a.bmm1_scale;
  p.options.v_scale = a.bmm2_scale_tensor ? 1.f : a.bmm2_scale;
  p.options.window_left = a.window_left;
  p.options.use_tensor_cores = a.use_tensor_cores;
  p.options.return_lse = lse != nullptr;
  if (int64_t(p.page_size) * a.max_pages_per_seq < a.max_seq_len)
    invalid(fmt::format("max_seq_len={} is not allowed; block_tables hold {} pages of {} rows per request",
                        a.max_seq_len, a.max_pages_per_seq, p.page_size));
  // The problem and the query's rows before anything asks the device.
  ops::validate(p);
  ops::query_token_rows(p, p.batch_size, query.shape[0], a.cum_seq_lens_q != nullptr);
  // After the argument checks: this asks the device.
  const bool pdl = choose_pdl(rt.engine().arch_of(query.device), a.enable_pdl);
  const auto plan = memoized_plan(rt, p);

  PagedKVView kv;
  kv.k_cache = k_cache;
  kv.v_cache = v_cache;
  kv.k_block_table = a.block_tables;
  // [batch, 2, max_pages]: K's pages then V's, per request.
  kv.v_block_table = a.uses_shared_paged_kv_idx ? a.block_tables : a.block_tables + a.max_pages_per_seq;
  kv.block_table_stride = a.uses_shared_paged_kv_idx ? a.max_pages_per_seq : 2 * a.max_pages_per_seq;
  kv.seq_lens = a.seq_lens;
  kv.table_entries = a.max_pages_per_seq;
  BatchDecodeLaunchExtras extras;
  extras.sinks = a.sinks;
  extras.cum_seq_lens_q = a.cum_seq_lens_q;
  extras.bmm1_scale = a.bmm1_scale_tensor;
  extras.bmm2_scale = a.bmm2_scale_tensor;
  extras.draft_mask = a.mask;
  extras.draft_mask_row_words = a.mask_row_words;
  extras.enable_pdl = pdl;
  detail::BatchDecodePlanInternals::run(*plan, query, kv, out, lse, workspace, workspace_bytes, stream, 1.f, 1.f,
                                        extras, rt.engine().table_check(query.device), kernels::kNamesTrtllm);
}

void cudnn_batch_decode_with_kv_cache(const Runtime& rt, const TensorView& q, const TensorView& k_cache,
                                      const TensorView& v_cache, void* workspace, size_t workspace_bytes,
                                      const CudnnDecodeArgs& a, const TensorView& out, Stream stream) {
  for (auto [ptr, name] : {std::pair{a.batch_offsets_k, "batch_offsets_k"}, std::pair{a.batch_offsets_v, "batch_offsets_v"}})
    if (ptr)
      unsupported(fmt::format("{} is set: K/V come paged through block_tables here, where a per-request element "
                              "offset has no meaning (ragged K/V offsets address a non-paged cache); allowed: none "
                              "(nullptr)",
                              name));
  if (!a.block_tables || !a.actual_seq_lens_kv)
    invalid(fmt::format("{} is null; a device int32 array is required",
                        a.block_tables ? "actual_seq_lens_kv" : "block_tables"));
  if (!(a.scale > 0.f)) invalid(fmt::format("scale={} is not allowed; it must be > 0", a.scale));
  if (a.max_pages_per_seq < 1)
    invalid(fmt::format("max_pages_per_seq={} is not allowed; it must be block_tables' last dimension (>= 1)",
                        a.max_pages_per_seq));
  BatchDecodeProblem p = shape_problem(q, k_cache, v_cache, KVLayout::HND, "q");
  p.max_seq_len = a.max_sequence_kv;
  p.options.sm_scale = a.scale;
  if (int64_t(p.page_size) * a.max_pages_per_seq < a.max_sequence_kv)
    invalid(fmt::format("max_sequence_kv={} is not allowed; block_tables hold {} pages of {} rows per request",
                        a.max_sequence_kv, a.max_pages_per_seq, p.page_size));
  const auto plan = memoized_plan(rt, p);
  PagedKVView kv;
  kv.k_cache = k_cache;
  kv.v_cache = v_cache;
  kv.k_block_table = kv.v_block_table = a.block_tables;
  kv.block_table_stride = a.max_pages_per_seq;
  kv.seq_lens = a.actual_seq_lens_kv;
  kv.table_entries = a.max_pages_per_seq;
  BatchDecodeLaunchExtras extras;
  extras.q_row_offsets = a.batch_offsets_q;  // one token per request: request b's row is token row b
  extras.o_row_offsets = a.batch_offsets_o;
  detail::BatchDecodePlanInternals::run(*plan, q, kv, out, nullptr, workspace, workspace_bytes, stream, 1.f, 1.f,
                                        extras, rt.engine().table_check(q.device), kernels::kNamesCudnn);
}

}  // namespace attnjit

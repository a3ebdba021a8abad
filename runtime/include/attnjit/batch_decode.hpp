// Batch decode over a paged KV cache: one query token per head for each of a
// batch of requests, each with its own sequence length -- or, for speculative
// decoding, several (q_len_per_req, or per-request lengths up to max_q_len):
// the last positions of the request's sequence, causal among themselves. One operator, one
// kernel family (the decode family of single decode), three entry points
// that only translate page-table conventions into a BatchDecodeProblem:
//
//  * BatchDecodeWithPagedKVCacheWrapper -- FlashInfer's wrapper: plan() with
//    the indptr / indices / last_page_len page table, run() per layer.
//  * trtllm_batch_decode_with_kv_cache   -- TensorRT-LLM's block tables + seq_lens.
//  * cudnn_batch_decode_with_kv_cache    -- cuDNN's block tables + actual_seq_lens_kv.
//
// The KV cache is a pair of 4-D page tensors (k, v): [pages, page_size,
// kv_heads, head_dim] for NHD or [pages, kv_heads, page_size, head_dim] for
// HND (any page stride, so the halves of a 5-D [pages, 2, ...] cache work:
// see kv_cache_halves). Index arrays are int32.
//
// Checks: what is on the host (FlashInfer's page table, given to plan()) is
// validated there -- monotonic indptr, page ids within the cache,
// last_page_len in [1, page_size]. What is on the device (block tables and
// seq_lens, and FlashInfer's table as the kernels read it, which a caller may
// overwrite before a graph replay) is checked by the kernels without a sync:
// a page id outside the cache, a seq_len above max_seq_len, an indptr or
// last_page_len outside the table reads nothing outside the cache (a page of
// it, the clamped length or no pages instead) and is raised as
// Error(InvalidArgument) naming the array, the index and the value at the
// next plan()/run() of the plan or wrapper (the next TensorRT-LLM / cuDNN
// call on the device, for those entry points), or by check(), which waits for
// the device. ATTNJIT_CHECK=1 makes every run wait for its stream and raise at
// once. The request's own output is void; the other requests' stay right.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/runtime.hpp"
#include "attnjit/tensor.hpp"
#include "attnjit/types.hpp"
#include "attnjit/variant.hpp"

namespace attnjit {

// How the kernel finds a request's pages.
enum class PageTable : uint8_t {
  IndptrIndices,  // FlashInfer: pages indices[indptr[b] .. indptr[b+1]), last one last_page_len[b] rows full
  BlockTable,     // TensorRT-LLM / cuDNN / vLLM: pages table[b][0 ..], length seq_lens[b]
};

struct BatchDecodeOptions {
  KVLayout kv_layout = KVLayout::NHD;
  PosEncoding pos_encoding_mode = PosEncoding::None;
  bool use_tensor_cores = false;
  std::optional<float> q_scale, k_scale, v_scale;  // fp8 calibration; default 1
  int window_left = -1;                            // -1: the whole sequence
  std::optional<float> logits_soft_cap;            // unset or 0: no capping
  std::optional<float> sm_scale;                   // default 1/sqrt(head_dim)
  std::optional<float> rope_scale, rope_theta;     // default 1 and 1e4
  bool return_lse = false;                         // base 2, as single decode
  // CUDA graphs: the grid and every launch argument stay the same for every
  // plan up to batch_size requests, so a captured run replays correctly
  // after a new plan() (the work list is rewritten in place).
  bool use_cuda_graph = false;
  // A user variant, as PrefillOptions::variant: b is the request, q its
  // query token (0 with one token). run() reads its bound values each time.
  std::shared_ptr<const Variant> variant;
};

struct BatchDecodeProblem {
  int batch_size = 0;  // with use_cuda_graph: the largest batch a plan may have
  int num_qo_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int page_size = 16;
  PageTable page_table = PageTable::IndptrIndices;
  // True: plan() is given every request's length, and balances chunks
  // across CTAs by them. False: only max_seq_len is known (the lengths are on
  // the device); every request gets the same split of max_seq_len rows.
  bool host_lengths = true;
  int64_t max_seq_len = 0;  // required when !host_lengths
  // Query tokens per request (speculative decoding; TensorRT-LLM's
  // q_len_per_req): q, o and lse have batch * q_len_per_req token rows,
  // request b's tokens t = 0 .. q_len_per_req - 1 at rows b * q_len_per_req + t.
  // Token t of a request with kv length L sits at position L - q_len + t and
  // sees keys [0, L - q_len + t] (and its window). L >= q_len is the caller's
  // to ensure (a token with no key gets o = 0, lse = -inf). > 1 runs on tensor
  // cores (head_dim 64 and 128).
  int q_len_per_req = 1;
  // > 0: per-request query lengths on the device (TensorRT-LLM's
  // cum_seq_lens_q, BatchDecodeLaunchExtras), each at most max_q_len;
  // q_len_per_req is then 1 or equal to it. 0: uniform q_len_per_req.
  int max_q_len = 0;
  // Several query tokens follow TensorRT-LLM's draft-tree mask
  // (BatchDecodeLaunchExtras::draft_mask) instead of being causal.
  bool draft_mask = false;
  DType q_dtype = DType::F16;
  DType kv_dtype = DType::F16;
  DType o_dtype = DType::F16;
  int device = 0;
  BatchDecodeOptions options;
};

// Where the kernel reads K and V. Pointers are device addresses of int32 arrays.
struct PagedKVView {
  TensorView k_cache, v_cache;  // 4-D, per the problem's kv_layout
  // PageTable::IndptrIndices
  const int32_t* indptr = nullptr;         // [batch + 1]
  const int32_t* indices = nullptr;        // [indptr[batch]]
  const int32_t* last_page_len = nullptr;  // [batch]
  // PageTable::BlockTable
  const int32_t* k_block_table = nullptr;  // [batch, block_table_stride]
  const int32_t* v_block_table = nullptr;  // may equal k_block_table
  int64_t block_table_stride = 0;          // in elements
  const int32_t* seq_lens = nullptr;       // [batch]
  // How many page ids the table holds: indices' length (IndptrIndices), or
  // a block table row's (BlockTable: max_pages_per_seq). It bounds the page
  // table reads of the L2 hints the kernel sends before its PDL wait, while
  // the kernel before may still write the table, and the indptr entries (and
  // a block table's seq_lens) the kernels accept; 0 (unknown) sends no hints
  // and leaves them unbounded.
  int64_t table_entries = 0;
};

// The K and V halves of a 5-D cache [pages, 2, ...] (FlashInfer's and
// TensorRT-LLM's single-tensor form) as 4-D views; [pages, 1, ...] gives the
// one tensor as both, as FlashInfer reads it. shape/strides in elements.
ATTNJIT_API std::pair<TensorView, TensorView> kv_cache_halves(void* data, DType dtype, const int64_t (&shape)[5],
                                                               const int64_t (&strides)[5], int device = 0);

// What run() takes per launch beyond the tensors (TensorRT-LLM's entry point).
struct BatchDecodeLaunchExtras {
  // [num_qo_heads] float32 on the device: attention sinks, logits in the
  // units of the scaled scores joining each head's softmax denominator
  // (kernels/variant.cuh); lse includes them. Null: none.
  const float* sinks = nullptr;
  // Programmatic dependent launch (sm_90+): the decode kernel's launch may
  // overlap the previous kernel's tail, and the merge kernel the decode's.
  bool enable_pdl = false;
  // [batch + 1] int32 on the device, required iff the problem has max_q_len >
  // 0 (TensorRT-LLM's cum_seq_lens_q): request b's query tokens are rows
  // cum_seq_lens_q[b] .. cum_seq_lens_q[b+1] of q, o and lse, at most
  // max_q_len of them. Not read by the host: the kernels void a request
  // whose pair of entries falls outside that (nothing computed or written)
  // and record the first bad entry as they do a bad seq_lens (check()).
  const int32_t* cum_seq_lens_q = nullptr;
  // [tokens] int32 on the device, or null (row t at t * stride(0)): where token
  // row t of q (of out) starts, in elements; heads keep stride(1) from there
  // (cuDNN's ragged batch_offsets_q / batch_offsets_o). Not read by the host:
  // the kernels void a request whose row would leave its tensor, or is not
  // 16-byte aligned, and record the first such offset (check()).
  const int32_t* q_row_offsets = nullptr;
  const int32_t* o_row_offsets = nullptr;
  // One float32 each on the device, or null: factors of the planned sm_scale
  // (TensorRT-LLM's bmm1_scale tensor; plan with sm_scale 1 for it to be the
  // whole scale) and of the output (bmm2_scale; v_scale 1). The kernels read
  // them when they run, once per CTA, so a captured CUDA graph uses the value
  // they hold at replay. Not read by the host.
  const float* bmm1_scale = nullptr;
  const float* bmm2_scale = nullptr;
  // Required iff the problem has draft_mask: TensorRT-LLM's speculative
  // mask on the device, draft_mask_row_words 32-bit words per query token
  // row (the rows of q), bit c (word c / 32, bit c % 32) of token t's row
  // set when t sees its request's draft token c (the request's last q_len
  // positions); keys before those are seen by every token. Not read by the host.
  const uint32_t* draft_mask = nullptr;
  // The values of a plan made with a user variant (options.variant: the same
  // source, every param bound), read by the host at this run. Null: the
  // options' own Variant object's values as bound now.
  const Variant* variant = nullptr;
  int draft_mask_row_words = 0;
};

namespace detail {
struct BatchDecodePlanInternals;
}

// Memory: run() takes a caller's workspace as scratch (the partial states of
// split requests, filled and read within the call), so plans may share one
// workspace on a stream. What plan() uploads and every run() reads (the work
// list, merge counters) lives in memory the plan owns: allocated by the
// library at the first plan() (plan_memory_bytes()), or a caller's buffer
// given to use_int_workspace() (FlashInfer's int_workspace_buffer).
class ATTNJIT_API BatchDecodePlan {
 public:
  // Validates the problem and makes every kernel ready on its device. The
  // workspace size depends on the problem only (it is sized for the worst
  // partition of batch_size requests), so one buffer serves every plan().
  BatchDecodePlan(const Runtime& rt, const BatchDecodeProblem& problem);
  ~BatchDecodePlan();  // waits for the device if it frees memory of its own
  BatchDecodePlan(BatchDecodePlan&&) noexcept;
  BatchDecodePlan& operator=(BatchDecodePlan&&) noexcept;

  const BatchDecodeProblem& problem() const;
  size_t workspace_bytes() const;    // run()'s scratch
  size_t plan_memory_bytes() const;  // the plan's own device memory
  std::string describe() const;      // kernels, grid, chunk size, work items

  // The plan's memory is `buffer` (device, 256-byte aligned, at least
  // plan_memory_bytes(), outliving the plan) instead of the library's own.
  // plan() again afterwards.
  void use_int_workspace(void* buffer, size_t bytes);

  // host_lengths problems: partitions the batch (kv_lens on the host, one per
  // request, batch <= problem().batch_size with use_cuda_graph, else equal)
  // and uploads the work list into the plan's memory on `stream`, with zeroed
  // counters for the split requests' merge in the decode kernel (each run()
  // leaves them zero). Not while `stream` captures. Lengths-on-device
  // problems need no plan() call.
  void plan(const int32_t* kv_lens, int batch, Stream stream);
  int batch() const;           // of the last plan()
  int num_work_items() const;  // CTA rows of the decode grid
  int chunk_size() const;

  // q [tokens, H_qo, D] (tokens: batch * q_len_per_req, or up to batch *
  // max_q_len with cum_seq_lens_q); o likewise in o_dtype; lse [tokens, H_qo]
  // float32 or null. workspace: scratch of at least workspace_bytes(). k_scale
  // / v_scale multiply the planned scales (FlashInfer passes them to run()).
  // Only launches: graph-capturable.
  void run(const TensorView& q, const PagedKVView& kv, const TensorView& o, const TensorView* lse, void* workspace,
           size_t workspace_bytes, Stream stream, float k_scale = 1.f, float v_scale = 1.f,
           const BatchDecodeLaunchExtras& extras = {}) const;
  // Waits for the device, then raises Error(InvalidArgument) for a bad
  // device-table entry a run met (see the header's Checks); plan() and run()
  // raise one at their start without waiting.
  void check() const;

  struct Impl;

 private:
  friend struct detail::BatchDecodePlanInternals;
  std::unique_ptr<Impl> impl_;
};

class ATTNJIT_API BatchDecodeWithPagedKVCacheWrapper {
 public:
  // float_workspace_buffer: scratch for run() (partial states), which other
  // wrappers may share on the same stream. The page table's device copy and
  // the plan's work list live in memory the wrapper owns (or in the buffer
  // given to set_int_workspace). use_cuda_graph: the page table is copied
  // into the fixed buffers given here (indptr >= max_batch_size + 1,
  // last_page_len >= max_batch_size, indices >= max_num_pages entries), and
  // plans keep one grid and one plan-memory address.
  BatchDecodeWithPagedKVCacheWrapper(const Runtime& rt, void* float_workspace_buffer, size_t workspace_bytes,
                                     KVLayout kv_layout = KVLayout::NHD, bool use_cuda_graph = false,
                                     bool use_tensor_cores = false, int32_t* paged_kv_indptr_buffer = nullptr,
                                     int32_t* paged_kv_indices_buffer = nullptr,
                                     int32_t* paged_kv_last_page_len_buffer = nullptr, int max_batch_size = 0,
                                     int64_t max_num_pages = 0, int device = 0);
  ~BatchDecodeWithPagedKVCacheWrapper();
  BatchDecodeWithPagedKVCacheWrapper(BatchDecodeWithPagedKVCacheWrapper&&) noexcept;
  BatchDecodeWithPagedKVCacheWrapper& operator=(BatchDecodeWithPagedKVCacheWrapper&&) noexcept;

  struct PlanArgs {
    int num_qo_heads = 0, num_kv_heads = 0, head_dim = 0, page_size = 16;
    PosEncoding pos_encoding_mode = PosEncoding::None;
    int window_left = -1;
    std::optional<float> logits_soft_cap;
    DType q_data_type = DType::F16;
    std::optional<DType> kv_data_type;  // default q_data_type
    std::optional<float> sm_scale, rope_scale, rope_theta;
    std::shared_ptr<const Variant> variant;  // BatchDecodeOptions::variant
  };
  // The page table on the host (validated here), copied to the device on
  // `stream`. indices may be longer than indptr[batch]: the rest is ignored, as FlashInfer.
  void plan(const std::vector<int32_t>& indptr, const std::vector<int32_t>& indices,
            const std::vector<int32_t>& last_page_len, const PlanArgs& args, Stream stream = nullptr);
  // FlashInfer's workspace_size(): what plan() with these arguments needs,
  // without planning. float_bytes: the scratch of float_workspace_buffer
  // (plan() refuses a smaller one; current_plan().workspace_bytes() after it);
  // int_bytes: the plan memory it fills (plan_memory_bytes() after it). The
  // same checks and errors as plan(); nothing is allocated, uploaded or
  // loaded and the current plan stays as it was. Reads the device's figures.
  WorkspaceSizes workspace_size(const std::vector<int32_t>& indptr, const std::vector<int32_t>& indices,
                                const std::vector<int32_t>& last_page_len, const PlanArgs& args) const;
  // k_cache / v_cache: 4-D (kv_cache_halves for the 5-D form). out [batch, H, D] in q's dtype.
  // enable_pdl: programmatic dependent launch, as FlashInfer's run(); unset
  // means where the GPU has it (sm_90 and newer), true elsewhere is an error.
  void run(const TensorView& q, const TensorView& k_cache, const TensorView& v_cache, const TensorView& out,
           const TensorView* lse = nullptr, std::optional<float> k_scale = {}, std::optional<float> v_scale = {},
           Stream stream = nullptr, std::optional<bool> enable_pdl = {}) const;
  const BatchDecodePlan& current_plan() const;  // Error(NotPlanned) before plan()
  // Waits for the device, then raises a bad device-table entry a run met
  // (a page id the caller wrote into the fixed indices buffer, say).
  void check() const;
  // FlashInfer's int_workspace_buffer: the wrapper's plan memory is `buffer`
  // (device, 256-byte aligned, outliving the wrapper) instead of the
  // library's own. plan() again afterwards.
  void set_int_workspace(void* buffer, size_t bytes);
  // A new scratch buffer for run(); the plan stays valid.
  void set_float_workspace(void* buffer, size_t bytes);
  // The plan memory the last plan() filled (work list and page table): what
  // a buffer given to set_int_workspace must hold for such a plan.
  size_t plan_memory_bytes() const;

  struct Impl;

 private:
  struct Prepared;
  Prepared prepare(const std::vector<int32_t>& indptr, const std::vector<int32_t>& indices,
                   const std::vector<int32_t>& last_page_len, const PlanArgs& args) const;
  std::unique_ptr<Impl> impl_;
};

// TensorRT-LLM's flashinfer.decode.trtllm_batch_decode_with_kv_cache.
struct TrtllmDecodeArgs {
  const int32_t* block_tables = nullptr;  // [batch, max_pages] or, !uses_shared_paged_kv_idx, [batch, 2, max_pages]
  int64_t max_pages_per_seq = 0;          // the table's last dimension
  bool uses_shared_paged_kv_idx = true;
  const int32_t* seq_lens = nullptr;      // [batch], device
  int64_t max_seq_len = 0;
  float bmm1_scale = 1.f;                 // the whole softmax scale (q, k scales and 1/sqrt(d) folded in)
  float bmm2_scale = 1.f;                 // multiplies the output (v scale)
  // The same scales as one float32 on the query's device (TensorRT-LLM's
  // `float | Tensor`), read by the kernels when they run (a CUDA graph
  // replays with the value the tensor holds then); the float beside a given
  // tensor is not used. Null: the float.
  const float* bmm1_scale_tensor = nullptr;
  const float* bmm2_scale_tensor = nullptr;
  int window_left = -1;
  KVLayout kv_layout = KVLayout::HND;
  std::optional<DType> out_dtype;         // default q's; "nvfp4" has no DType: see nvfp4_out
  bool nvfp4_out = false, nvfp4_kv = false;  // Blackwell-only in the original: errors here
  const float* sinks = nullptr;           // [num_qo_heads] float32, device: added to each head's softmax denominator
  int q_len_per_req = 1;                  // query tokens per request (speculative decoding): query has batch * q_len_per_req rows
  // Per-request query lengths (TensorRT-LLM's max_q_len + cum_seq_lens_q,
  // given together): cum_seq_lens_q [batch + 1] int32 on the device, each
  // request at most max_q_len tokens; batch_size (the length of seq_lens) is
  // then required, as the query's rows no longer give it.
  const int32_t* cum_seq_lens_q = nullptr;
  int max_q_len = 0;
  int batch_size = 0;                     // required with cum_seq_lens_q; else 0 (query rows / q_len_per_req) or that
  std::optional<bool> enable_pdl;         // programmatic dependent launch; unset: on where the GPU has it (sm_90+)
  // TensorRT-LLM's `mask` with several query tokens: null (causal), or the
  // draft-tree mask on the device, mask_row_words uint32 words per query row
  // (BatchDecodeLaunchExtras::draft_mask).
  const uint32_t* mask = nullptr;
  int mask_row_words = 0;
  bool use_tensor_cores = false;
};
// query [tokens, H, D] (tokens = batch * q_len_per_req, or cum_seq_lens_q[batch]);
// k_cache / v_cache 4-D per kv_layout; out like query; lse optional [tokens, H]
// (an extension). The workspace must hold
// batch_decode_workspace_bytes for the problem (128 MiB covers any sane one).
ATTNJIT_API void trtllm_batch_decode_with_kv_cache(const Runtime& rt, const TensorView& query,
                                                   const TensorView& k_cache, const TensorView& v_cache,
                                                   void* workspace, size_t workspace_bytes,
                                                   const TrtllmDecodeArgs& args, const TensorView& out,
                                                   const TensorView* lse = nullptr, Stream stream = nullptr);

// cuDNN's flashinfer.decode.cudnn_batch_decode_with_kv_cache: k_cache /
// v_cache [pages, kv_heads, page_size, head_dim] (HND), block_tables
// [batch, max_pages] and actual_seq_lens_kv [batch] on the device.
struct CudnnDecodeArgs {
  float scale = 0.f;  // required, > 0
  int64_t max_sequence_kv = 0;
  const int32_t* actual_seq_lens_kv = nullptr;
  const int32_t* block_tables = nullptr;
  int64_t max_pages_per_seq = 0;
  bool is_cuda_graph_compatible = false;  // always true here: the launch depends on nothing but the shapes
  // Ragged offsets, int32 on the device, [batch] or cuDNN's cumulative [batch + 1]
  // (only the first batch entries are read): request b's q (out) row starts at
  // element batch_offsets_q[b] (batch_offsets_o[b]) instead of b * stride(0).
  // Not read by the host: a row outside its tensor or off 16-byte alignment
  // is not computed or written, and the next call names the offset.
  const int32_t* batch_offsets_q = nullptr;
  const int32_t* batch_offsets_o = nullptr;
  // K / V come paged through block_tables, where a per-request element offset
  // has no meaning: an error when set.
  const int32_t* batch_offsets_k = nullptr;
  const int32_t* batch_offsets_v = nullptr;
};
ATTNJIT_API void cudnn_batch_decode_with_kv_cache(const Runtime& rt, const TensorView& q, const TensorView& k_cache,
                                                  const TensorView& v_cache, void* workspace, size_t workspace_bytes,
                                                  const CudnnDecodeArgs& args, const TensorView& out,
                                                  Stream stream = nullptr);

// The workspace a problem needs (what BatchDecodePlan::workspace_bytes returns).
ATTNJIT_API size_t batch_decode_workspace_bytes(const Runtime& rt, const BatchDecodeProblem& problem);

}  // namespace attnjit

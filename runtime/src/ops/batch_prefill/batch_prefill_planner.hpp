// The batch prefill planner (ragged and paged KV): from the host copies of
// the index arrays, the work list of (request, query tile, KV chunk) items
// the CTAs take, longest first, the KV split that fills the device when the
// batch's query tiles alone would not, and the workspace: partial states
// (float part), then the arrays plan() uploads (int part). Pure host code.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "attnjit/prefill.hpp"
#include "ops/operator.hpp"
#include "prefill_params.h"

namespace attnjit::ops {

struct BatchPrefillShape {
  std::vector<int32_t> qo_indptr;  // [batch + 1]
  std::vector<int32_t> kv_lens;    // [batch]
  int num_qo_heads = 0, num_kv_heads = 0, head_dim = 0;
  DType q_dtype = DType::F16, kv_dtype = DType::F16;
  PrefillOptions options;
  KVSource source = KVSource::Ragged;
  // Sizes of what plan() uploads besides the work list.
  size_t num_page_indices = 0;  // paged: paged_kv_indices entries
  size_t mask_bytes = 0;        // custom mask: packed bytes, every request's block from a byte boundary
  // > 0: CUDA-graph mode for plans of up to this many requests: a fixed
  // grid and kernel whatever the lengths, the work as running tile counts
  // (tile_indptr), no KV split, the index arrays in the caller's buffers.
  int graph_max_batch = 0;
  // CUDA-graph mode: the query tile's fragments per warp (1 or 2) a
  // captured launch already uses; 0: chosen from this plan's lengths.
  int graph_frags_m = 0;
};

struct BatchPrefillLayout {
  KernelLaunch prefill;
  std::optional<KernelLaunch> merge;  // present when num_chunks > 1
  WorkspaceLayout workspace;          // float: partial_o, partial_lse; int: work, qo_indptr, kv_indptr,
                                      // paged_kv_indices, paged_kv_last_page_len, mask, mask_indptr (as needed)
  std::vector<int32_t> work;          // per CTA: requests, then query tiles, chunks, KV heads (4 * num_work)
  int num_work = 0;                   // CTAs (items x KV heads); CUDA-graph mode: query tiles
  std::vector<int32_t> tile_indptr;   // CUDA-graph mode: [graph_max_batch + 1] running query-tile counts
  int num_chunks = 1;
  int chunk_size = 0;
  kernels::VariantParams var{};
  // A block-sparse variant's classification over the batch's query tiles
  // (its rows: request b's tiles are rows block_mask_row_indptr[b] ..
  // [b + 1]): the launch, the float region "block_mask" (scratch), and what
  // plan() uploads: per row {request, query tile, qo_len, kv_len}
  // ("block_mask_rows") and the row indptr ("block_mask_row_indptr").
  std::optional<KernelLaunch> block_mask;
  int block_mask_slots = 0, block_mask_stride = 0;
  std::vector<int32_t> block_mask_rows, block_mask_row_indptr;

  nlohmann::json to_json() const;
};

// Validates the shape (indptr monotone from 0, causal lengths, heads,
// dtypes, options) and plans. Errors name the argument, its value (and the
// request) and what is allowed.
BatchPrefillLayout plan_batch_prefill(const BatchPrefillShape& shape, const DeviceFigures& device);
// A block-sparse variant (nothing otherwise): refuses CUDA-graph mode by name
// (its captured launch has no fixed number of query tiles to classify).
void fit_batch_block_sparse(const PrefillKernel& k, bool cuda_graph);
// The checks alone (plan() runs them before it asks the device anything).
void validate_batch_prefill(const BatchPrefillShape& shape);

// KV rows per chunk when the KV is not split in CUDA-graph mode: a multiple
// of every KV tile that no int32 length reaches.
constexpr int32_t kWholeKVChunk = (INT32_MAX / 128) * 128;

// Checks an indptr array: batch + 1 entries, starting at 0, non-decreasing.
// from_zero=false: a KV indptr, which may start past 0 as FlashInfer allows (vLLM passes the prefill
// requests' slice of its paged_kv_indptr without rebasing it); its entries address K/V rows or pages.
void check_indptr(const std::vector<int32_t>& indptr, const char* name, size_t batch, bool from_zero = true);

}  // namespace attnjit::ops

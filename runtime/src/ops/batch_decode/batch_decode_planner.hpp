// Every shape decision of batch decode: which kernels (the decode family's
// choice, with a paged KV source), the launch grids, the workspace, and how
// the batch's KV rows are cut into chunks for the CTAs. Pure host code,
// deterministic; the device enters only as figures (SM count, shared memory per block).
//
// Partition. A work item is one chunk of one request; the grid has one CTA
// row per item (times head groups and KV heads). The chunk size is the
// batch's KV rows times the CTAs per item, divided by one wave of resident
// CTAs (rounded up to the tile, at least kMinRowsPerSplit): a batch that
// fills the GPU is not split, a small or skewed one is cut until it fills a
// wave, and no chunk is longer than a wave's share, so one long request
// beside many short ones no longer sets the time. Items are ordered longest
// first, so the hardware scheduler packs the short ones behind them. Since
// chunk >= rows * ctas / wave, the items number at most batch + wave / ctas.
//
// A batch that fills nearly one wave unsplit (within 1/16 of the share:
// 32 x 4096 is 256 of 264 CTAs) is left so.
//
// The tail. A batch that fills the GPU a few times over is not split, but
// its last round may hold only a few items (34 x 4096: 33 items fill a wave
// and the 34th runs alone). A model of the run (a wave's worth of items at
// a time, fewer running faster, up to 2x; each item costing 64 rows more
// than its own) picks how many of the shortest items to cut into how many
// pieces, if any cut gains 2% by it (docs/PERFORMANCE.md). Without
// CUDA graphs it may add four waves' worth of items; with them only what the
// fixed grid leaves free, since every padding item is a CTA that starts and
// exits. batch + wave / ctas (+ the four waves' worth) sizes the workspace
// and, with CUDA graphs, the grid. With the lengths only on the device
// every request is planned at max_seq_len, and the same model picks 1 to 4
// uniform splits for a batch that fills the GPU (the merge kernel's cost
// counted): TensorRT-LLM's 34 x 4096 198.9 -> 159.9 us, 40 x 4096 -23%.
#pragma once
#include <optional>
#include <vector>

#include "attnjit/batch_decode.hpp"
#include "decode_params.h"
#include "ops/operator.hpp"

namespace attnjit::ops {

struct BatchDecodeLayout {
  KernelLaunch decode;  // grid.z: the most work items (graph or uniform); a listed plan launches its own count
  // Present when the lengths are only on the device and the uniform partition
  // splits (a host_lengths plan merges split requests in the decode kernel,
  // kernels/decode_epilogue.cuh). grid.x: batch_size * max query tokens *
  // num_qo_heads, one CTA per output row.
  std::optional<KernelLaunch> merge;
  // Float regions "partial_o", "partial_lse"; int regions "work",
  // "merge_indptr" and "merge_counters" when the lengths are on the host.
  WorkspaceLayout workspace;
  int max_items = 0;
  int max_slots = 0;
  int ctas_per_item = 0;
  int wave = 0;  // resident CTAs of one wave
  int rows_per_iter = 0;
  // Lengths on the device: the uniform partition, fixed by the problem.
  int uniform_splits = 1, uniform_chunk = 0;
  // Rows each first-wave item's CTAs warm in L2 before the PDL wait
  // (kernels/decode_prefetch.cuh), and how many items that is.
  int prefetch_rows = 0, prefetch_items = 0;
  // Run-time scalars, resolved from the options' defaults.
  float sm_scale = 0, v_scale = 1, soft_cap = 0, rope_rcp_scale = 1, rope_log2_theta = 0;

  nlohmann::json to_json() const;
};

struct BatchDecodePartition {
  std::vector<kernels::DecodeWorkItem> items;  // real items, then padding (request -1) up to max_items in graph mode
  std::vector<int32_t> merge_indptr;           // per request: its partial slots; padded to batch_size + 1
  int batch = 0;
  int chunk_size = 0;
  int num_items = 0;  // real items
  int num_slots = 0;
};

// Validates, then sizes everything that depends on the problem alone.
BatchDecodeLayout plan_batch_decode(const BatchDecodeProblem& problem, const DeviceFigures& device);
// The rows each first-wave CTA warms in a launch of `items` real work items
// (the layout's prefetch_rows, or none where that measured slower).
int batch_decode_warmed_rows(const BatchDecodeProblem& problem, const BatchDecodeLayout& layout, int items);

// The chunks for these lengths (host_lengths problems); kv_lens[batch].
// Error(InvalidArgument) naming a length below 1 or a batch out of range.
BatchDecodePartition partition_batch_decode(const BatchDecodeProblem& problem, const BatchDecodeLayout& layout,
                                            const int32_t* kv_lens, int batch);
// Rows a request of length len attends to (its window, from its first query token's).
int batch_decode_rows(const BatchDecodeProblem& problem, int64_t len);
// The kernels a problem needs whatever its lengths (prewarm): decode, and
// the merge kernel when the lengths are only on the device.
std::vector<KernelSpec> batch_decode_kernels(const BatchDecodeProblem& problem);

}  // namespace attnjit::ops

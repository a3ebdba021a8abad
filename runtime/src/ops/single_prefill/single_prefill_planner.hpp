// Every shape decision of single prefill: the query tile (from the packed
// query length), whether and how the KV is split across CTAs, the grid and
// the workspace. Pure host code; the device enters only as its SM count.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "attnjit/prefill.hpp"
#include "ops/operator.hpp"
#include "prefill_params.h"

namespace attnjit::ops {

struct SinglePrefillLayout {
  KernelLaunch prefill;
  std::optional<KernelLaunch> merge;  // present when num_chunks > 1
  // A block-sparse variant's classification, launched before the prefill
  // kernel at every run into the workspace's "block_mask" region.
  std::optional<KernelLaunch> block_mask;
  int block_mask_slots = 0;           // 1 or the KV heads
  int block_mask_stride = 0;          // KV tiles per row (prefill tile_kv)
  WorkspaceLayout workspace;          // "partial_o", "partial_lse" when split; "block_mask"
  int num_q_tiles = 1;
  bool tiles_fastest = false;         // grid x: query tiles fastest (else KV heads; prefill_work)
  int num_chunks = 1;
  int chunk_size = 0;
  kernels::VariantParams var{};       // run-time scalars, pointers left null

  nlohmann::json to_json() const;
};

SinglePrefillLayout plan_single_prefill(const SinglePrefillProblem& problem, const DeviceFigures& device);
// Every kernel the problem may need whatever its lengths (prewarm).
std::vector<KernelSpec> single_prefill_kernels(const SinglePrefillProblem& problem);

// A block-sparse variant's classification for `rows` query tiles of a
// prefill kernel k over kv_len keys: its launch (a CTA per row and slot)
// and the int32 region "block_mask" in the caller's workspace (scratch:
// written at the start of each run, read by the prefill kernel after it).
// Sets slots and stride; nullopt when k's variant is not block-sparse.
std::optional<KernelLaunch> plan_block_mask(const PrefillKernel& k, int rows, int64_t kv_len, int num_kv_heads,
                                            WorkspaceLayout& workspace, int& slots, int& stride);

// Shared with the batch planners: query rows per CTA for a packed query length
// (tokens x group), and the KV split that fills the device for a given number
// of CTAs. Resident CTAs per SM are data (from the compiler's register and
// shared-memory figures), never a query of a compiled kernel.
int prefill_frags_m(int head_dim, int64_t max_packed_len);
// The skeleton: k.backend and k.warp_specialized from the options and the
// device's arch (k's head_dim and variant set). The one place that decides
// which skeleton "auto" runs; Unsupported as prefill_backend for a backend
// asked for by name where it cannot run.
void choose_prefill_skeleton(PrefillKernel& k, const PrefillOptions& o, const std::string& arch);
// Whether a plan on sm_90a with k.backend fa3 runs the warp-specialized
// skeleton: asked for by name, or "auto" where it serves k's variant (what
// prewarm lists for the Hopper part of an "auto" problem).
bool prefill_warp_specialized(const PrefillKernel& k, const PrefillOptions& o);
int prefill_stages(int head_dim, int frags_m);  // K/V pipeline depth
int prefill_min_ctas_per_sm(const PrefillKernel& k);  // from its head_dim, tiles, stages and variant
void choose_prefill_pipeline(PrefillKernel& k);  // stages and min_ctas_per_sm from head_dim and frags_m
// Whether a request's query tiles all see the same keys: no causal mask (or
// a custom one, which reads every tile) and no window.
bool prefill_tiles_cost_alike(const PrefillOptions& o);
// Whether the items of a launch cost the same or fall in cost in launch
// order: tiles that cost alike and no block-sparse variant (whose tiles cost
// what the mask leaves).
bool prefill_costs_fall(const PrefillOptions& o, const PrefillKernel& k);
// A causal window (built in, no custom mask or block mask) over a request
// at least kWindowLevelRequests windows long: past its first window every
// query tile sees window_left + 1 keys, so the items cost alike but for a
// few cheaper ones, which KV-heads-fastest order runs last; static
// persistent rounds balance them and overlap each item's prologue with the
// last one's epilogue (H100, 16k tokens, window 1023, 16 heads, d 128:
// 420 -> 400 us, bench/call_gaps.py). Shorter requests cost as a causal
// mask does (a sawtooth static rounds do not balance).
constexpr int64_t kWindowLevelRequests = 4;
bool prefill_window_costs_level(const PrefillOptions& o, const PrefillKernel& k, int64_t qo_len);
// fa3_ws outside CUDA-graph mode: persistent CTAs as the runtime asks
// (DeviceFigures::persistent_prefill); by default where they measured faster
// (docs/PERFORMANCE.md): items whose costs fall, which static rounds balance,
// and heads up to 128 wide, where a second Q tile fits. The grid's x for
// `items` items: one CTA an item, or for a persistent kernel at most one CTA per SM.
void choose_prefill_persistence(PrefillKernel& k, const DeviceFigures& device, bool costs_fall);
uint32_t prefill_grid_x(const PrefillKernel& k, int64_t items, const DeviceFigures& device);
int prefill_ctas_per_sm(const PrefillKernel& k);
void fit_fa3_tile(PrefillKernel& k, int64_t ctas_at_128_rows, int sm_count);  // one warpgroup for small grids
// Unsupported where a 512-wide head's kernel needs more shared memory than
// the device's per-block limit (116,736 B: sm_80 and sm_90, not sm_86/89).
// The other head dims are planned for sm_90 as before (not checked here).
void check_prefill_fits(const PrefillKernel& k, const DeviceFigures& device);
struct KVSplit {
  int num_chunks = 1;
  int chunk_size = 0;
};
// What a KV split is chosen from: the CTAs of the unsplit grid, the longest
// KV, the kernel's tile shape, how many CTAs the device runs at once, and
// the output rows a merge would combine (tokens x query heads).
struct SplitProblem {
  int64_t ctas, kv_len, rows;
  int tile_q, tile_kv, head_dim, wave;
};
KVSplit plan_kv_split(const SplitProblem& s);

}  // namespace attnjit::ops

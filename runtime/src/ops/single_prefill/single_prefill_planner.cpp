#include "ops/single_prefill/single_prefill_planner.hpp"

#include <string>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "attnjit/error.hpp"
#include "block_mask_params.h"
#include "ops/split_states.hpp"
#include "ops/attention_options/prefill_options.hpp"
#include "ops/single_prefill/single_prefill_problem.hpp"
#include "spec/block_mask_kernel.hpp"

namespace attnjit::ops {

namespace {

// Below this many keys per chunk the split's fixed costs (loading Q, writing
// and merging a partial state) outweigh the parallelism it buys.
constexpr int64_t kMinChunkRows = 256;

// Whether `ctas` CTAs of `smem_bytes` dynamic shared memory each fit in one
// sm_90 SM (228 KB, 1 KB of it reserved per CTA).
bool fit_per_sm(int smem_bytes, int ctas) {
  constexpr int kSmemPerSm = 228 * 1024, kReservedPerCta = 1024;
  return ctas * (smem_bytes + kReservedPerCta) <= kSmemPerSm;
}

// A block-sparse user variant: its tiles cost what its mask leaves, known only on the device.
bool has_block_mask(const PrefillKernel& k) { return k.variant.user && k.variant.user->block_sparse; }

}  // namespace

// 32 rows per warp (a 128-row CTA tile) halve the K/V traffic per query row
// and reuse every K/V fragment for two MMAs: where the query fills the
// tiles. 256-wide heads stay at 16 rows per warp (their O alone is 128
// registers per fragment); their KV tiles are 32 rows, the others' 64
// (prefill_params.h).
int prefill_frags_m(int head_dim, int64_t max_packed_len) {
  return head_dim <= 128 && max_packed_len >= 512 ? 2 : 1;
}

// fa3_ws serves every variant fa3 does (16-bit K/V, head_dim up to 256) but
// RoPE on 256-wide heads, where its producer spills (spec validation refuses it).
bool fa3_ws_serves(const PrefillKernel& k) {
  return fa3_takes_head_dim(k.head_dim) && dtype_size(k.variant.kv_dtype) == 2 &&
         !(k.variant.pos_encoding == PosEncoding::RopeLlama && k.head_dim > 128);
}

// "auto" takes fa3_ws where it serves the variant at 128- and 256-wide heads,
// where it beats fa3 (docs/PERFORMANCE.md); 64-wide heads stay on fa3, whose
// three CTAs per SM beat fa3_ws's one there.
bool prefill_warp_specialized(const PrefillKernel& k, const PrefillOptions& o) {
  if (k.fp8()) return o.backend == "auto" || o.backend == "fa3_ws";  // the only fp8-q kernel
  return o.backend == "fa3_ws" || (o.backend == "auto" && k.head_dim >= 128 && fa3_ws_serves(k));
}

void choose_prefill_skeleton(PrefillKernel& k, const PrefillOptions& o, const std::string& arch) {
  if (k.fp8()) {  // fp8 q, K and V: fa3_ws alone runs it ('auto' or 'fa3_ws'; validate_prefill_dtypes)
    if (!PrefillKernel::fa3_runs_on(arch))
      throw Error(Status::Unsupported,
                  fmt::format("q.dtype=float8_e4m3fn needs the warp-specialized Hopper kernel (backend 'fa3_ws', "
                              "sm_90a); this device is {}; allowed here: float16, bfloat16 q",
                              arch));
    if (!prefill_warp_specialized(k, o))
      throw Error(Status::Unsupported,
                  fmt::format("backend='{}' is not supported with q.dtype=float8_e4m3fn; allowed: 'auto', 'fa3_ws'",
                              o.backend));
    k.backend = PrefillBackend::Fa3;
    k.warp_specialized = true;
    return;
  }
  k.backend = prefill_backend(o, k.variant.kv_dtype, arch, k.head_dim);
  k.warp_specialized = k.backend == PrefillBackend::Fa3 && prefill_warp_specialized(k, o);
}

// A third K/V stage where two CTAs per SM still fit in sm_90's 228 KB (ncu,
// d 128 with two stages: 5% of warp samples waited for K/V tiles at the
// barrier). 128-wide heads with 16-row warps stay at two stages, which
// keeps them at two CTAs per SM. 256-wide heads take one stage (a K and a
// V buffer, waited on apart), whose 64-key tiles fit two CTAs per SM where
// a ring of two holds 32-key tiles only. Tuned for sm_90; an sm_80 device
// (164 KB) runs those CTAs one per SM.
int prefill_stages(int head_dim, int frags_m) {
  if (head_dim > 128) return 1;
  return fit_per_sm(kernels::prefill_smem_bytes(head_dim, frags_m, 3), 2) ? 3 : 2;
}

// 64-wide heads: three CTAs (12 warps) per SM where their shared memory
// fits, by capping registers at 168 (sm_90a, ptxas: 212 uncapped; at 168
// 0-2 spill loads per KV tile, 7-9 with RoPE or a soft cap in loops of
// 2400-3500 instructions). Not with a custom mask or ALiBi: 16-39 spill
// loads per tile there. The other head dims need 240-255 registers.
int prefill_min_ctas_per_sm(const PrefillKernel& k) {
  const bool three_fit = fit_per_sm(k.dynamic_smem_bytes(), 3);
  const bool light = k.variant.mask != MaskMode::Custom && k.variant.pos_encoding != PosEncoding::Alibi;
  return k.head_dim == 64 && three_fit && light ? 3 : 1;
}

// The Hopper skeleton: two CTAs per SM (64-key tiles, registers capped at
// 128), so one CTA's prologue and epilogue overlap the other's products,
// where the variant's KV loop keeps (almost) all of its state in registers
// there; else one CTA, with 128-key tiles (190-252 registers). sm_90a,
// ptxas, spill loads per KV tile at two CTAs (d 128): none to 2 for no
// mask, causal, a window without causal, paged or ragged; 2-5 with a soft
// cap or ALiBi (loops of 900-2300 instructions); 18 with RoPE, 19 with a
// custom mask, 26 for causal with a window. 256-wide heads: one (O alone is
// 128 registers). Two CTAs beat one where they fit (docs/PERFORMANCE.md).
int prefill_sm90_ctas_per_sm(const PrefillKernel& k) {
  const auto& v = k.variant;
  const bool spills = v.pos_encoding == PosEncoding::RopeLlama || v.mask == MaskMode::Custom ||
                      (v.mask == MaskMode::Causal && k.window);
  return k.head_dim <= 128 && !spills ? 2 : 1;
}

void choose_prefill_pipeline(PrefillKernel& k) {
  if (k.warp_specialized) {  // one CTA shape (prefill_ws_params.h): 128 query rows, two stages
    k.frags_m = 2;
    k.stages = 2;
    k.min_ctas_per_sm = 1;
    return;
  }
  if (k.backend == PrefillBackend::Fa3) {
    k.frags_m = 2;  // two warpgroups, 128 query rows; fit_fa3_tile narrows it for small grids
    k.stages = 2;
    k.min_ctas_per_sm = prefill_sm90_ctas_per_sm(k);
    return;
  }
  k.stages = prefill_stages(k.head_dim, k.frags_m);
  k.min_ctas_per_sm = prefill_min_ctas_per_sm(k);
}

bool prefill_tiles_cost_alike(const PrefillOptions& o) { return (o.custom_mask || !o.causal) && o.window_left < 0; }

bool prefill_costs_fall(const PrefillOptions& o, const PrefillKernel& k) {
  return prefill_tiles_cost_alike(o) && !has_block_mask(k);
}

bool prefill_window_costs_level(const PrefillOptions& o, const PrefillKernel& k, int64_t qo_len) {
  return o.causal && !o.custom_mask && o.window_left >= 0 && !has_block_mask(k) &&
         qo_len >= kWindowLevelRequests * (int64_t(o.window_left) + 1);
}

void choose_prefill_persistence(PrefillKernel& k, const DeviceFigures& device, bool costs_fall) {
  switch (device.persistent_prefill) {
    case Config::Persistence::Always: k.persistent = k.warp_specialized; return;
    case Config::Persistence::Never: k.persistent = false; return;
    case Config::Persistence::Auto: k.persistent = k.warp_specialized && costs_fall && k.head_dim <= 128; return;
  }
}

uint32_t prefill_grid_x(const PrefillKernel& k, int64_t items, const DeviceFigures& device) {
  const int64_t ctas = k.persistent ? std::min<int64_t>(items, std::max(1, device.sm_count)) : items;
  return static_cast<uint32_t>(std::max<int64_t>(1, ctas));
}

// One warpgroup (64 query rows) where 128-row tiles would leave more than
// half the SMs without a CTA: twice the CTAs for a short prefill.
void fit_fa3_tile(PrefillKernel& k, int64_t ctas_at_128_rows, int sm_count) {
  if (k.backend == PrefillBackend::Fa3 && !k.warp_specialized && ctas_at_128_rows * 2 <= sm_count) k.frags_m = 1;
}

void check_prefill_fits(const PrefillKernel& k, const DeviceFigures& device) {
  if (k.head_dim > 256 && k.dynamic_smem_bytes() > device.smem_per_block)
    throw Error(Status::Unsupported,
                fmt::format("head_dim={} prefill needs {} B of shared memory per block; this device ({}) allows {} B; "
                            "head_dim 512 runs on sm_80 and sm_90 (and later archs with as much)",
                            k.head_dim, k.dynamic_smem_bytes(), device.arch, device.smem_per_block));
}

int prefill_ctas_per_sm(const PrefillKernel& k) {
  if (k.backend == PrefillBackend::Fa3) return k.min_ctas_per_sm;  // registers: the launch bounds' figure
  // Shared memory as sm_90 has it (fit_per_sm; ~100 KB on sm_80): planned
  // for the larger; a smaller device just runs more waves.
  int by_smem = 1;
  while (by_smem < 4 && fit_per_sm(k.dynamic_smem_bytes(), by_smem + 1)) ++by_smem;
  // Registers: 240-255 per thread (128 threads) allow two, unless capped for more.
  return std::min(by_smem, std::max(2, k.min_ctas_per_sm));
}

// The split that minimizes a cost model in microseconds, so that it is taken
// only where it pays: idle SMs for many KV tiles (an append of a few tokens
// to a long cache), never for a short square prefill whose CTAs already run
// in one wave (there the second wave and the merge cost more than the idle
// SMs). The constants are a Hopper fa3 CTA's: a 128 x 64 x 128 tile's two
// MMAs in about 1 us, about 3 us of Q load, pipeline fill and epilogue per
// CTA, and a merge pass of about 4 us plus its partial states written and
// read at about 2.5 TB/s.
KVSplit plan_kv_split(const SplitProblem& s) {
  constexpr double kTileFlopsPerUs = 4.2e6, kCtaFixedUs = 3.0, kMergeUs = 4.0, kMergeBytesPerUs = 2.5e6;
  KVSplit best;
  best.chunk_size = static_cast<int>((s.kv_len + s.tile_kv - 1) / s.tile_kv * s.tile_kv);
  const double tile_us = double(s.tile_q) * s.tile_kv * s.head_dim * 4 / kTileFlopsPerUs;
  const int64_t tiles = (s.kv_len + s.tile_kv - 1) / s.tile_kv;
  auto cost = [&](int64_t chunks, int64_t chunk_tiles) {
    const int64_t waves = (chunks * s.ctas + s.wave - 1) / s.wave;
    double us = double(waves) * (kCtaFixedUs + double(chunk_tiles) * tile_us);
    if (chunks > 1) us += kMergeUs + double(s.rows) * chunks * s.head_dim * 8 / kMergeBytesPerUs;
    return us;
  };
  double best_us = cost(1, tiles);
  // Chunks of at least kMinChunkRows keys, and no more CTAs than one wave holds.
  const int64_t most =
      std::min<int64_t>(s.kv_len / kMinChunkRows, std::max<int64_t>(1, s.wave / std::max<int64_t>(1, s.ctas)));
  for (int64_t want = 2; want <= most; ++want) {
    const int64_t chunk_tiles = (tiles + want - 1) / want;
    const int64_t chunks = (tiles + chunk_tiles - 1) / chunk_tiles;  // whole tiles per chunk: the count may round down
    const double us = cost(chunks, chunk_tiles);
    if (us < best_us) {
      best_us = us;
      best.num_chunks = static_cast<int>(chunks);
      best.chunk_size = static_cast<int>(chunk_tiles * s.tile_kv);
    }
  }
  return best;
}

std::vector<KernelSpec> single_prefill_kernels(const SinglePrefillProblem& problem) {
  validate(problem);
  std::vector<KernelSpec> out;
  const bool fp8 = problem.q_dtype == DType::E4M3;  // fa3_ws only
  if (problem.options.backend != "fa3" && problem.options.backend != "fa3_ws" && !fp8) {
    for (int fm : {1, 2}) {
      if (fm != 1 && prefill_frags_m(problem.head_dim, INT64_MAX) != fm) continue;
      PrefillKernel k = prefill_variant(problem.options, problem.head_dim, problem.q_dtype, problem.kv_dtype);
      k.frags_m = fm;
      choose_prefill_pipeline(k);
      out.emplace_back(k);
    }
  }
  // The Hopper kernel where the options may pick it (prewarm keeps it for sm_90a only).
  if (problem.options.backend != "fa2" && (dtype_size(problem.kv_dtype) == 2 || fp8) &&
      fa3_takes_head_dim(problem.head_dim)) {
    for (int warpgroups : {2, 1}) {
      PrefillKernel k = prefill_variant(problem.options, problem.head_dim, problem.q_dtype, problem.kv_dtype);
      k.backend = PrefillBackend::Fa3;
      k.warp_specialized = prefill_warp_specialized(k, problem.options);
      choose_prefill_pipeline(k);
      choose_prefill_persistence(k, DeviceFigures{}, prefill_costs_fall(problem.options, k));  // as planned by default
      if (k.warp_specialized && warpgroups == 1) continue;  // one CTA shape
      k.frags_m = warpgroups;
      out.emplace_back(k);
      // A causal window plans persistent CTAs for requests several windows long (prefill_window_costs_level).
      if (k.warp_specialized && !k.persistent && prefill_window_costs_level(problem.options, k, INT64_MAX)) {
        choose_prefill_persistence(k, DeviceFigures{}, true);
        if (k.persistent) out.emplace_back(k);
      }
    }
  }
  out.emplace_back(split_merge_kernel(problem.head_dim, prefill_o_dtype(problem.options, problem.q_dtype)));
  const auto& user = problem.options.variant;
  if (user && user->source().block_sparse) out.emplace_back(BlockMaskKernel{user->shared_source()});
  return out;
}

std::optional<KernelLaunch> plan_block_mask(const PrefillKernel& k, int rows, int64_t kv_len, int num_kv_heads,
                                            WorkspaceLayout& workspace, int& slots, int& stride) {
  const auto& user = k.variant.user;
  if (!user || !user->block_sparse) return std::nullopt;
  slots = user->heads_vary ? num_kv_heads : 1;
  stride = static_cast<int>((kv_len + k.tile_kv() - 1) / k.tile_kv());
  workspace.add_float("block_mask", size_t(kernels::block_mask_entries(rows, slots, stride)) * sizeof(int32_t));
  KernelLaunch launch;
  launch.role = "block_mask";
  launch.spec = BlockMaskKernel{user};
  launch.shape.grid[0] = static_cast<uint32_t>(rows);
  launch.shape.grid[1] = static_cast<uint32_t>(slots);
  launch.shape.grid[2] = 1;
  launch.shape.threads = kernels::kBlockMaskThreads;
  launch.shape.smem_bytes = 0;
  return launch;
}

SinglePrefillLayout plan_single_prefill(const SinglePrefillProblem& problem, const DeviceFigures& device) {
  validate(problem);
  SinglePrefillLayout layout;
  const int group = problem.num_qo_heads / problem.num_kv_heads;
  const int64_t packed = problem.qo_len * group;
  PrefillKernel k = prefill_variant(problem.options, problem.head_dim, problem.q_dtype, problem.kv_dtype);
  choose_prefill_skeleton(k, problem.options, device.arch);
  k.frags_m = prefill_frags_m(problem.head_dim, packed);
  choose_prefill_pipeline(k);
  choose_prefill_persistence(k, device, prefill_costs_fall(problem.options, k) ||
                                            prefill_window_costs_level(problem.options, k, problem.qo_len));
  fit_fa3_tile(k, (packed + k.tile_q() - 1) / k.tile_q() * problem.num_kv_heads, device.sm_count);
  check_prefill_fits(k, device);

  layout.num_q_tiles = static_cast<int>((packed + k.tile_q() - 1) / k.tile_q());
  // 512-wide heads: vo_parts CTAs per (tile, KV head), adjacent in x (prefill_items).
  const int vo_parts = k.backend == PrefillBackend::Fa2 ? kernels::prefill_vo_parts(problem.head_dim) : 1;
  const int64_t ctas = int64_t(layout.num_q_tiles) * problem.num_kv_heads * vo_parts;
  const int wave = device.sm_count * prefill_ctas_per_sm(k);
  const KVSplit split = plan_kv_split(
      {ctas, problem.kv_len, packed * problem.num_kv_heads, k.tile_q(), k.tile_kv(), problem.head_dim, wave});
  layout.num_chunks = split.num_chunks;
  layout.chunk_size = split.chunk_size;

  layout.prefill.role = "prefill";
  layout.prefill.spec = k;
  // Every tile costs the same without a causal mask, a window or block
  // sparsity: one KV head's tiles then run side by side and share its K/V in
  // L2; otherwise KV heads vary fastest and the last query tiles (the most
  // keys, for causal masks and most block masks) go first (prefill_work in
  // prefill_schedule.cuh). A block mask's costs are known only on the
  // device; in tile order a 16k document mask's longest rows (a document of
  // 5.5k tokens) ran in the last wave and left SMs idle 23% of the time
  // (ncu, H100: SM active cycles 878k of 1145k elapsed).
  layout.tiles_fastest = prefill_costs_fall(problem.options, k);
  layout.prefill.shape.grid[0] = prefill_grid_x(k, ctas, device);
  layout.prefill.shape.grid[1] = layout.num_chunks;
  layout.prefill.shape.grid[2] = 1;
  layout.prefill.shape.threads = k.threads();
  layout.prefill.shape.smem_bytes = k.dynamic_smem_bytes();

  if (layout.num_chunks > 1) {
    const size_t rows = size_t(problem.qo_len) * problem.num_qo_heads;
    layout.merge = merge_launch(problem.head_dim, prefill_o_dtype(problem.options, problem.q_dtype),
                                static_cast<uint32_t>(rows));  // one CTA per output row
    add_split_states(layout.workspace, layout.num_chunks, rows, problem.head_dim);
  }
  layout.block_mask = plan_block_mask(k, layout.num_q_tiles, problem.kv_len, problem.num_kv_heads, layout.workspace,
                                      layout.block_mask_slots, layout.block_mask_stride);
  layout.var = prefill_variant_params(problem.options, problem.head_dim);
  return layout;
}

nlohmann::json SinglePrefillLayout::to_json() const {
  nlohmann::json kernels = kernels_json(prefill, merge);
  if (block_mask) kernels.insert(kernels.begin(), launch_json(*block_mask));  // it runs first
  return {{"kernels", kernels},
          {"num_q_tiles", num_q_tiles},
          {"tiles_fastest", tiles_fastest},
          {"num_chunks", num_chunks},
          {"chunk_size", chunk_size},
          {"workspace", workspace.to_json()}};
}

}  // namespace attnjit::ops

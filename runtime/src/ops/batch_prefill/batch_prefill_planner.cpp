#include "ops/batch_prefill/batch_prefill_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "attnjit/error.hpp"
#include "ops/split_states.hpp"
#include "ops/attention_options/prefill_options.hpp"
#include "ops/attention_options/user_variant_options.hpp"
#include "ops/single_prefill/single_prefill_planner.hpp"
#include "spec/user_variant.hpp"
#include "invalid_argument.hpp"

namespace attnjit::ops {

void check_indptr(const std::vector<int32_t>& indptr, const char* name, size_t batch, bool from_zero) {
  if (indptr.size() != batch + 1)
    invalid(fmt::format("{}: {} entries is not allowed; it must have batch_size + 1 = {}", name, indptr.size(), batch + 1));
  if (from_zero ? indptr[0] != 0 : indptr[0] < 0)
    invalid(fmt::format("{}[0]={} is not allowed; it must be {}", name, indptr[0], from_zero ? "0" : ">= 0"));
  for (size_t b = 0; b < batch; ++b)
    if (indptr[b + 1] < indptr[b])
      invalid(fmt::format("{}[{}]={} < {}[{}]={} is not allowed; it must be non-decreasing", name, b + 1,
                          indptr[b + 1], name, b, indptr[b]));
}

void validate_batch_prefill(const BatchPrefillShape& shape) {
  validate_prefill_heads(shape.num_qo_heads, shape.num_kv_heads, shape.head_dim, shape.q_dtype, shape.kv_dtype);
  validate_prefill_options(shape.options);
  validate_prefill_backend(shape.options, shape.head_dim);
  validate_prefill_dtypes(shape.options, shape.head_dim, shape.q_dtype, shape.source);
  if (shape.qo_indptr.size() < 2)
    invalid(fmt::format("qo_indptr: {} entries is not allowed; it needs batch_size + 1 >= 2", shape.qo_indptr.size()));
  const size_t batch = shape.qo_indptr.size() - 1;
  check_indptr(shape.qo_indptr, "qo_indptr", batch);
  if (shape.kv_lens.size() != batch)
    invalid(fmt::format("kv lengths: {} requests is not allowed; qo_indptr has batch_size = {}", shape.kv_lens.size(),
                        batch));
  for (size_t b = 0; b < batch; ++b) {
    const int64_t qo = shape.qo_indptr[b + 1] - shape.qo_indptr[b], kv = shape.kv_lens[b];
    // kv 0 (no KV) and causal qo > kv are allowed: rows that see no key give o = 0, lse = -inf.
    if (kv < 0) invalid(fmt::format("kv_len of request {}={} is not allowed; it must be >= 0 (qo_len {})", b, kv, qo));
  }
  if (shape.graph_max_batch > 0 && batch > size_t(shape.graph_max_batch))
    invalid(
        fmt::format("qo_indptr: batch_size={} is not allowed with use_cuda_graph=true; allowed: 1 to "
                    "max_batch_size={} (the fixed buffers' size)",
                    batch, shape.graph_max_batch));
  const int64_t nnz_qo = shape.qo_indptr.back();
  if (nnz_qo * shape.num_qo_heads > INT32_MAX / 2)
    invalid(fmt::format("qo_indptr[-1] * num_qo_heads={} is not allowed; it must be <= {}", nnz_qo * shape.num_qo_heads,
                        INT32_MAX / 2));
}

namespace {

// CUDA-graph mode: what a captured launch bakes in (kernel, grid, workspace
// addresses) depends on the head shape, the options, graph_max_batch and
// the query tile; the lengths reach the kernel through the uploaded tile
// counts. The query tile is chosen from the lengths of the plan before the
// capture (graph_frags_m 0) and kept for later plans (the wrapper passes it
// on). One wave of persistent CTAs takes (tile, KV head) items from a
// counter, last tiles first.
void plan_graph_mode(const BatchPrefillShape& shape, PrefillKernel& k, const DeviceFigures& device,
                     BatchPrefillLayout& layout) {
  const size_t batch = shape.qo_indptr.size() - 1;
  const int group = shape.num_qo_heads / shape.num_kv_heads;
  int64_t max_packed = 0;
  for (size_t b = 0; b < batch; ++b)
    max_packed = std::max<int64_t>(max_packed, int64_t(shape.qo_indptr[b + 1] - shape.qo_indptr[b]) * group);
  k.frags_m = shape.graph_frags_m > 0 ? shape.graph_frags_m : prefill_frags_m(shape.head_dim, max_packed);
  choose_prefill_pipeline(k);
  const int tq = k.tile_q();
  layout.tile_indptr.assign(size_t(shape.graph_max_batch) + 1, 0);
  for (size_t b = 0; b < size_t(shape.graph_max_batch); ++b) {
    const int64_t qo = b < batch ? shape.qo_indptr[b + 1] - shape.qo_indptr[b] : 0;
    layout.tile_indptr[b + 1] = layout.tile_indptr[b] + static_cast<int32_t>((qo * group + tq - 1) / tq);
  }
  layout.num_work = layout.tile_indptr.back();
  layout.num_chunks = 1;
  layout.chunk_size = kWholeKVChunk;
  layout.prefill.shape.grid[0] = static_cast<uint32_t>(std::max(1, device.sm_count * prefill_ctas_per_sm(k)));
  layout.workspace.add_int("tile_indptr", layout.tile_indptr.size() * sizeof(int32_t));
  layout.workspace.add_int("work_counter", 2 * sizeof(int32_t));  // next item, CTAs done (zero between launches)
}

}  // namespace

void fit_batch_block_sparse(const PrefillKernel& k, bool cuda_graph) {
  const auto& user = k.variant.user;
  if (!user || !user->block_sparse) return;
  if (cuda_graph)
    throw Error(Status::Unsupported,
                fmt::format("variant user{} has block_sparse=true, which batch prefill with use_cuda_graph=true does "
                            "not take (its captured launch has no fixed number of query tiles to classify); "
                            "allowed: use_cuda_graph=false, or block_sparse=false",
                            variant_source_digest(*user)));
}

namespace {

// The classification's rows: every request's query tiles in request order.
void plan_batch_block_mask(const BatchPrefillShape& shape, const PrefillKernel& k, int64_t max_kv,
                           BatchPrefillLayout& layout) {
  const size_t batch = shape.qo_indptr.size() - 1;
  const int group = shape.num_qo_heads / shape.num_kv_heads, tq = k.tile_q();
  layout.block_mask_row_indptr.assign(batch + 1, 0);
  layout.block_mask_rows.clear();
  for (size_t b = 0; b < batch; ++b) {
    const int32_t qo = shape.qo_indptr[b + 1] - shape.qo_indptr[b];
    const int32_t tiles = static_cast<int32_t>((int64_t(qo) * group + tq - 1) / tq);
    for (int32_t t = 0; t < tiles; ++t)
      layout.block_mask_rows.insert(layout.block_mask_rows.end(), {int32_t(b), t, qo, shape.kv_lens[b]});
    layout.block_mask_row_indptr[b + 1] = layout.block_mask_row_indptr[b] + tiles;
  }
  layout.block_mask = plan_block_mask(k, layout.block_mask_row_indptr.back(), std::max<int64_t>(max_kv, 1),
                                      shape.num_kv_heads, layout.workspace, layout.block_mask_slots,
                                      layout.block_mask_stride);
  layout.workspace.add_int("block_mask_rows", std::max<size_t>(layout.block_mask_rows.size(), 1) * sizeof(int32_t));
  layout.workspace.add_int("block_mask_row_indptr", (batch + 1) * sizeof(int32_t));
}

}  // namespace

BatchPrefillLayout plan_batch_prefill(const BatchPrefillShape& shape, const DeviceFigures& device) {
  validate_batch_prefill(shape);
  const size_t batch = shape.qo_indptr.size() - 1;
  const int group = shape.num_qo_heads / shape.num_kv_heads;
  int64_t max_packed = 0, max_kv = 0;
  for (size_t b = 0; b < batch; ++b) {
    max_packed = std::max<int64_t>(max_packed, int64_t(shape.qo_indptr[b + 1] - shape.qo_indptr[b]) * group);
    max_kv = std::max<int64_t>(max_kv, shape.kv_lens[b]);
  }
  const int64_t nnz_qo = shape.qo_indptr.back();

  BatchPrefillLayout layout;
  PrefillKernel k = prefill_variant(shape.options, shape.head_dim, shape.q_dtype, shape.kv_dtype);
  choose_prefill_skeleton(k, shape.options, device.arch);
  fit_batch_block_sparse(k, shape.graph_max_batch > 0);
  k.kv_source = shape.source;
  layout.var = prefill_variant_params(shape.options, shape.head_dim);
  layout.prefill.role = "prefill";
  layout.prefill.shape.grid[1] = 1;
  layout.prefill.shape.grid[2] = 1;
  if (shape.graph_max_batch > 0) {
    plan_graph_mode(shape, k, device, layout);
    check_prefill_fits(k, device);
    layout.prefill.spec = k;
    layout.prefill.shape.threads = k.threads();
    layout.prefill.shape.smem_bytes = k.dynamic_smem_bytes();
    return layout;
  }
  k.frags_m = prefill_frags_m(shape.head_dim, max_packed);
  choose_prefill_pipeline(k);
  // (The work list below puts requests longest first: costs that fall.)
  choose_prefill_persistence(k, device, prefill_costs_fall(shape.options, k));
  auto count_tiles = [&](int tq) {
    int64_t n = 0;
    for (size_t b = 0; b < batch; ++b)
      n += (int64_t(shape.qo_indptr[b + 1] - shape.qo_indptr[b]) * group + tq - 1) / tq;
    return n;
  };
  fit_fa3_tile(k, count_tiles(k.tile_q()) * shape.num_kv_heads, device.sm_count);
  check_prefill_fits(k, device);
  const int tq = k.tile_q();
  // 512-wide heads: vo_parts CTAs per work item, adjacent in x (prefill_items).
  const int vo_parts = k.backend == PrefillBackend::Fa2 ? kernels::prefill_vo_parts(shape.head_dim) : 1;

  // Query tiles of every request; the KV split (one chunk size for the batch,
  // so the merge sees the same number of partial states for every row) only
  // when those tiles leave the device idle.
  const int64_t tiles = count_tiles(tq);
  const int wave = device.sm_count * prefill_ctas_per_sm(k);
  const KVSplit split = plan_kv_split({tiles * shape.num_kv_heads * vo_parts, std::max<int64_t>(max_kv, 1),
                                       nnz_qo * shape.num_qo_heads, k.tile_q(), k.tile_kv(), shape.head_dim, wave});
  layout.num_chunks = split.num_chunks;
  layout.chunk_size = split.chunk_size;

  // Items with their cost (keys the tile's last query sees in the chunk).
  // Requests go longest first and each request's items largest first: the
  // long work starts early and the short fills the tail. A request's items
  // stay together because its query tiles read the same K/V: started side by
  // side they share it in L2. (Sorted by cost alone, 32 requests x 128 new
  // tokens on 8k cached ran every request's last tile first, and the four
  // tiles of one request started a wave apart.)
  struct Item {
    int64_t request_cost, cost;
    int32_t request, tile, chunk;
  };
  std::vector<Item> items;
  for (size_t b = 0; b < batch; ++b) {
    const int64_t qo = shape.qo_indptr[b + 1] - shape.qo_indptr[b], kv = shape.kv_lens[b];
    const int64_t n_tiles = (qo * group + tq - 1) / tq;
    const size_t first = items.size();
    for (int64_t t = 0; t < n_tiles; ++t) {
      const int64_t last_q = std::min(qo - 1, ((t + 1) * tq - 1) / group);
      const int64_t reach =
          shape.options.causal && !shape.options.custom_mask ? std::min(kv, kv - qo + last_q + 1) : kv;
      for (int c = 0; c < layout.num_chunks; ++c) {
        const int64_t lo = int64_t(c) * layout.chunk_size, hi = std::min<int64_t>(reach, lo + layout.chunk_size);
        items.push_back({0, std::max<int64_t>(0, hi - lo), int32_t(b), int32_t(t), int32_t(c)});
      }
    }
    int64_t request_cost = 0;
    for (size_t i = first; i < items.size(); ++i) request_cost = std::max(request_cost, items[i].cost);
    for (size_t i = first; i < items.size(); ++i) items[i].request_cost = request_cost;
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.request_cost != b.request_cost) return a.request_cost > b.request_cost;
    if (a.request != b.request) return a.request < b.request;
    return a.cost > b.cost;
  });

  // CTAs: every item once per KV head, in list order. Along a run of one
  // request's items of equal cost (a non-causal request's query tiles) the
  // KV head varies slowest, so that head's tiles start side by side and
  // share its K/V in L2; elsewhere it varies fastest, so CTAs start in cost
  // order. (KV heads fastest everywhere ran a 16k-token request as 16 heads
  // x 16 tiles at once: L2 hit rate 88% against FlashInfer's 98%, ncu.)
  const int H = shape.num_kv_heads;
  layout.num_work = static_cast<int>(items.size()) * H;
  layout.work.resize(4 * size_t(layout.num_work));
  size_t cta = 0;
  for (size_t i = 0; i < items.size();) {
    size_t end = i + 1;
    while (end < items.size() && items[end].request == items[i].request && items[end].cost == items[i].cost) ++end;
    for (int h = 0; h < H; ++h)
      for (size_t j = i; j < end; ++j, ++cta) {
        layout.work[cta] = items[j].request;
        layout.work[layout.num_work + cta] = items[j].tile;
        layout.work[2 * size_t(layout.num_work) + cta] = items[j].chunk;
        layout.work[3 * size_t(layout.num_work) + cta] = h;
      }
    i = end;
  }

  layout.prefill.spec = k;
  layout.prefill.shape.grid[0] = prefill_grid_x(k, int64_t(std::max(1, layout.num_work)) * vo_parts, device);
  layout.prefill.shape.threads = k.threads();
  layout.prefill.shape.smem_bytes = k.dynamic_smem_bytes();

  const size_t rows = size_t(nnz_qo) * shape.num_qo_heads;
  if (layout.num_chunks > 1) {
    layout.merge = merge_launch(shape.head_dim, prefill_o_dtype(shape.options, shape.q_dtype), static_cast<uint32_t>(rows));
    add_split_states(layout.workspace, layout.num_chunks, rows, shape.head_dim);
  }
  layout.workspace.add_int("work", layout.work.size() * sizeof(int32_t));
  layout.workspace.add_int("qo_indptr", (batch + 1) * sizeof(int32_t));
  layout.workspace.add_int("kv_indptr", (batch + 1) * sizeof(int32_t));
  if (shape.source == KVSource::Paged) {
    layout.workspace.add_int("paged_kv_indices", std::max<size_t>(shape.num_page_indices, 1) * sizeof(int32_t));
    layout.workspace.add_int("paged_kv_last_page_len", batch * sizeof(int32_t));
  }
  if (shape.options.custom_mask) {
    layout.workspace.add_int("mask", std::max<size_t>(shape.mask_bytes, 1));
    layout.workspace.add_int("mask_indptr", batch * sizeof(int32_t));
  }
  if (k.variant.user && k.variant.user->block_sparse) plan_batch_block_mask(shape, k, max_kv, layout);
  return layout;
}

nlohmann::json BatchPrefillLayout::to_json() const {
  nlohmann::json kernels = kernels_json(prefill, merge);
  if (block_mask) kernels.insert(kernels.begin(), launch_json(*block_mask));  // it runs first
  return {{"kernels", kernels},
          {"cuda_graph", !tile_indptr.empty()},
          {"num_work", num_work},
          {"num_chunks", num_chunks},
          {"chunk_size", chunk_size},
          {"workspace", workspace.to_json()}};
}

}  // namespace attnjit::ops

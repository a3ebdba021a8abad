#include "ops/batch_decode/batch_decode_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <vector>

#include "attnjit/error.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"
#include "ops/attention_options/decode_options.hpp"
#include "ops/decode_choice.hpp"
#include "ops/split_states.hpp"

namespace attnjit::ops {

namespace {

DecodeKernel decode_spec(const BatchDecodeProblem& problem, const DeviceFigures& device) {
  DecodeShape shape = decode_shape(problem, problem.o_dtype, device);
  shape.q_len = max_query_tokens(problem);
  shape.draft_mask = problem.draft_mask;
  return choose_decode_kernel(
      shape, problem.page_table == PageTable::BlockTable ? KVSourceKind::BlockTable : KVSourceKind::Paged);
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The chunk for a batch of total_rows rows whose longest request has max_rows
// (see the header): a wave's share of the rows, never below the split
// minimum, and never more than the longest request needs. A batch that
// fills nearly a whole wave unsplit (within 1/16 of the share) stays so:
// cutting it would double its items for the few CTAs it leaves idle.
int chunk_for(int64_t total_rows, int max_rows, const BatchDecodeLayout& layout) {
  const int64_t share = (total_rows * layout.ctas_per_item + layout.wave - 1) / layout.wave;
  const int64_t longest = round_up(std::max(max_rows, 1), layout.rows_per_iter);
  if (share + share / 16 >= longest) return static_cast<int>(longest);
  int64_t chunk = std::max<int64_t>({share, kMinRowsPerSplit, layout.rows_per_iter});
  chunk = round_up(chunk, layout.rows_per_iter);
  return static_cast<int>(std::min<int64_t>(chunk, longest));
}

// The tail of the partition (see the header). The model: at most `slots`
// items run at once (a wave of CTAs over an item's CTAs) and share the
// bandwidth; with fewer busy each runs faster, up to kBoost times its share
// (its own loads in flight bound it). An item costs its rows, rounded up to
// the tile, plus kItemCostRows (its prologue's dependent loads and its
// epilogue). Items start in list order as slots free up. The constants were
// fitted to measured runs (docs/PERFORMANCE.md).
constexpr int64_t kItemCostRows = 64;
constexpr double kBoost = 2.0;
constexpr double kMinGain = 0.02;  // a cut the model gains less from is not worth its error
// Tail cuts tried: each of the `tail` shortest items into 2 to kMaxTailPieces pieces.
constexpr int kMaxTailPieces = 8;
// Extra items the tail may add without CUDA graphs, in items per wave: a
// bound for the workspace. A CUDA-graph plan keeps the grid it had (every
// padding item is a CTA that must start and exit) and cuts only within it.
constexpr int kTailWaves = 4;

int64_t item_cost(int rows, const BatchDecodeLayout& layout) {
  return round_up(rows, layout.rows_per_iter) + kItemCostRows;
}
// Items that run at once: a wave of CTAs over an item's CTAs.
int item_slots(const BatchDecodeLayout& layout) { return std::max(1, layout.wave / layout.ctas_per_item); }

// Starts an item of cost `cost` on the slot that frees first, while every
// slot is busy (each at its share: time and work advance together); `heap`
// holds the slots' finish times (a min-heap). Returns the start time.
int64_t schedule(std::vector<int64_t>& heap, int64_t cost) {
  std::pop_heap(heap.begin(), heap.end(), std::greater<>());
  const int64_t start = heap.back();
  heap.back() += cost;
  std::push_heap(heap.begin(), heap.end(), std::greater<>());
  return start;
}

// When the last item has started at `now`: the time the slots' items all
// finish, each running faster as fewer remain (the model above).
double drain(std::vector<int64_t>& finish, int64_t now) {
  const double slots = static_cast<double>(finish.size());
  std::sort(finish.begin(), finish.end());
  auto it = std::upper_bound(finish.begin(), finish.end(), now);  // the items still running
  double t = static_cast<double>(now);
  int64_t done = now;
  for (auto active = finish.end() - it; it != finish.end(); ++it, --active) {
    t += static_cast<double>(*it - done) / std::min(kBoost, slots / static_cast<double>(active));
    done = *it;
  }
  return t;
}

// Rows [begin, end) in `pieces` chunks of whole tiles, as even as the tiles allow
// (an empty item, a request with no KV, stays one empty item: its CTA writes o = 0, lse = -inf).
template <class Emit>
void cut_rows(int begin, int end, int pieces, int rows_per_iter, Emit&& emit) {
  const int tiles = (end - begin + rows_per_iter - 1) / rows_per_iter;
  pieces = std::max(1, std::min(pieces, tiles));
  for (int k = 0; k < pieces; ++k)
    emit(begin + rows_per_iter * int(int64_t(k) * tiles / pieces),
         std::min(end, begin + rows_per_iter * int(int64_t(k + 1) * tiles / pieces)));
}

struct TailCut {
  int tail = 0;    // the last `tail` items of the longest-first list ...
  int pieces = 1;  // ... each cut into this many
};

// The cut of the list's tail that finishes soonest under the model, among
// the tails that would leave the last round partly idle (the items past
// the last whole round, or one round more) and at most `budget` extra
// items; none unless the model gains kMinGain. items: longest first. Cheap
// enough for every plan: the items before the last two rounds are taken as
// spread evenly over the slots (a chunk is at most a slot's share, so
// longest-first keeps them so), and the cuts are tried only when the list
// as it is loses time to its tail.
TailCut choose_tail_cut(const std::vector<kernels::DecodeWorkItem>& items, const BatchDecodeLayout& layout,
                        int budget) {
  const int n = static_cast<int>(items.size());
  const int slots = item_slots(layout);
  TailCut best;
  if (n <= slots || budget <= 0) return best;  // one round: the chunk size already fills it
  const int rpi = layout.rows_per_iter;
  const auto cost = [&](int i) { return item_cost(items[i].end - items[i].begin, layout); };
  const int r = n % slots, longest_tail = r + slots <= n ? r + slots : r;
  int done = std::max(0, n - longest_tail - 2 * slots);
  int64_t work = 0, even = 0;
  for (int i = 0; i < n; ++i) work += cost(i);
  for (int i = 0; i < done; ++i) even += cost(i);
  std::vector<int64_t> heap(slots, even / slots), trial = heap, pieces;
  int64_t last = 0;  // when the last item started
  for (int i = done; i < n; ++i) last = schedule(trial, cost(i));
  double best_time = drain(trial, last);
  const double goal = best_time * (1 - kMinGain);
  if (goal < static_cast<double>(work) / slots) return best;  // no cut can gain enough: even all slots busy to the end
  pieces.reserve(size_t(longest_tail) * kMaxTailPieces);
  for (int tail : {r + slots, r}) {  // the longer tail first: its prefix is the shorter
    if (tail <= 0 || tail > n) continue;
    for (; done < n - tail; ++done) schedule(heap, cost(done));
    for (int f = 2; f <= kMaxTailPieces && int64_t(tail) * (f - 1) <= budget; ++f) {
      pieces.clear();
      for (int i = n - tail; i < n; ++i)
        cut_rows(items[i].begin, items[i].end, f, rpi,
                 [&](int b, int e) { pieces.push_back(item_cost(e - b, layout)); });
      std::sort(pieces.begin(), pieces.end(), std::greater<>());
      trial = heap;
      for (const int64_t c : pieces) last = schedule(trial, c);
      const double t = drain(trial, last);
      if (t < best_time && t < goal) best_time = t, best = {tail, f};
    }
  }
  return best;
}

// Lengths only on the device: every request is planned at max_seq_len and
// cut into the same number of chunks, so the model has a closed form. n
// equal items of cost c on `slots`: whole rounds, then the last r items
// together, each at min(kBoost, slots / r) times its share.
double uniform_time(int64_t n, int64_t c, int slots) {
  const int64_t rounds = n / slots, r = n % slots;
  return static_cast<double>(rounds * c) +
         (r ? static_cast<double>(c) / std::min(kBoost, static_cast<double>(slots) / static_cast<double>(r)) : 0.0);
}
// The merge kernel that split chunks need, and its wait for the decode grid, in the model's rows.
constexpr int64_t kMergeKernelRows = 128;
constexpr int kMaxUniformSplits = 4;

// The chunk for a batch whose unsplit requests fill the GPU (rows each):
// the whole request, unless the last round of whole requests would run a
// few alone and cutting every request into s chunks gains kMinGain under
// the model.
int uniform_tail_chunk(int batch, int rows, const BatchDecodeLayout& layout) {
  const int slots = item_slots(layout);
  int best = static_cast<int>(round_up(rows, layout.rows_per_iter));
  double best_time = uniform_time(batch, item_cost(rows, layout), slots) * (1 - kMinGain);
  for (int s = 2; s <= kMaxUniformSplits; ++s) {
    const int chunk = static_cast<int>(round_up((rows + s - 1) / s, layout.rows_per_iter));
    if (chunk < kMinRowsPerSplit) break;
    const double t = uniform_time(int64_t(batch) * s, item_cost(chunk, layout), slots) + kMergeKernelRows;
    if (t < best_time) best_time = t, best = chunk;
  }
  return best;
}

}  // namespace

int batch_decode_rows(const BatchDecodeProblem& problem, int64_t len) {
  // The first query token's window starts q - 1 rows before the last one's
  // (the most tokens: with per-request lengths the device starts a shorter
  // request's rows later, so this bounds them).
  const int w = problem.options.window_left;
  return static_cast<int>(w >= 0 ? std::min<int64_t>(len, int64_t(w) + max_query_tokens(problem)) : len);
}

std::vector<KernelSpec> batch_decode_kernels(const BatchDecodeProblem& problem) {
  validate(problem);
  if (problem.host_lengths) return {decode_spec(problem, DeviceFigures{})};
  return {decode_spec(problem, DeviceFigures{}), split_merge_kernel(problem.head_dim, problem.o_dtype)};
}

BatchDecodeLayout plan_batch_decode(const BatchDecodeProblem& problem, const DeviceFigures& device) {
  validate(problem);
  BatchDecodeLayout layout;
  const DecodeKernel decode = decode_spec(problem, device);
  const DecodeTile tile = decode_tile(decode);
  const int group = problem.num_qo_heads / problem.num_kv_heads;
  const int q_len = max_query_tokens(problem);
  const int query_blocks = decode_query_blocks(decode, group, q_len);
  layout.rows_per_iter = tile.rows_per_iter;
  layout.ctas_per_item = problem.num_kv_heads * query_blocks;
  layout.wave = device.sm_count * tile.ctas_per_sm;
  const int B = problem.batch_size, H = problem.num_qo_heads;

  if (problem.host_lengths) {
    const int wave_items = (layout.wave + layout.ctas_per_item - 1) / layout.ctas_per_item;
    layout.max_items = B + wave_items + (problem.options.use_cuda_graph ? 0 : kTailWaves * wave_items);
    layout.max_slots = layout.max_items;  // every item of a split request has a slot
  } else {
    const int rows = batch_decode_rows(problem, problem.max_seq_len);
    layout.uniform_chunk = chunk_for(int64_t(B) * rows, rows, layout);
    // A batch that fills the GPU unsplit: its tail, as the host-length partition's.
    if (layout.uniform_chunk >= rows) layout.uniform_chunk = uniform_tail_chunk(B, rows, layout);
    layout.uniform_splits = (rows + layout.uniform_chunk - 1) / layout.uniform_chunk;
    layout.max_items = B * layout.uniform_splits;
    layout.max_slots = layout.uniform_splits > 1 ? layout.max_items : 0;
  }
  // The first wave's items warm their first rows: a later wave starts when
  // the wait has long returned. A chunk is at least a tile, so the rows are
  // bounded by the budget alone (and by each item's rows, in the kernel).
  layout.prefetch_items = std::min(layout.max_items, std::max(1, layout.wave / layout.ctas_per_item));
  layout.prefetch_rows = decode_warmed_rows(decode, INT_MAX, layout.prefetch_items * problem.num_kv_heads);
  if (layout.max_items > 65535)
    throw Error(Status::Unsupported,
                fmt::format("batch_size={} with max_seq_len={} needs {} work items; the grid allows 65535", B,
                            problem.max_seq_len, layout.max_items));

  layout.decode.role = "decode";
  layout.decode.spec = decode;
  // Head blocks, then token tiles: siblings share K/V in L2. Then KV heads,
  // then items, so the longest-first order holds across heads (decode_work.cuh).
  layout.decode.shape.grid[0] = query_blocks;
  layout.decode.shape.grid[1] = problem.num_kv_heads;
  layout.decode.shape.grid[2] = layout.max_items;
  layout.decode.shape.threads = decode.threads();
  layout.decode.shape.smem_bytes = decode.dynamic_smem_bytes();

  if (!problem.host_lengths && layout.uniform_splits > 1) {
    layout.merge =
        merge_launch(problem.head_dim, problem.o_dtype, B * q_len * H);  // one row per (request, token, head)
  }

  // A slot holds the most tokens a request has (kernels/decode_params.h).
  if (layout.max_slots > 0) add_split_states(layout.workspace, layout.max_slots, size_t(q_len) * H, problem.head_dim);
  if (problem.host_lengths) {
    layout.workspace.add_int("work", size_t(layout.max_items) * sizeof(kernels::DecodeWorkItem));
    layout.workspace.add_int("merge_indptr", size_t(B + 1) * sizeof(int32_t));
    // The in-kernel merge's counters, one per row group (kernels/decode_params.h):
    // plan() uploads them as zeros with the work list, every run leaves them so.
    layout.workspace.add_int("merge_counters", size_t(B) * problem.num_kv_heads * query_blocks * sizeof(int32_t));
  }

  set_decode_scales(layout, problem.options, problem.head_dim);
  return layout;
}

int batch_decode_warmed_rows(const BatchDecodeProblem& problem, const BatchDecodeLayout& layout, int items) {
  // fp8 K/V warms only a launch of one wave: past one wave, warming cost fp8 more than it saved.
  return dtype_size(problem.kv_dtype) == 1 && items > layout.prefetch_items ? 0 : layout.prefetch_rows;
}

BatchDecodePartition partition_batch_decode(const BatchDecodeProblem& problem, const BatchDecodeLayout& layout,
                                            const int32_t* kv_lens, int batch) {
  const bool graph = problem.options.use_cuda_graph;
  if (graph ? (batch < 1 || batch > problem.batch_size) : batch != problem.batch_size)
    throw Error(
        Status::InvalidArgument,
        graph ? fmt::format("batch={} is not allowed; this CUDA-graph plan allows 1 to {} (its batch_size)", batch,
                            problem.batch_size)
              : fmt::format("batch={} is not allowed; this plan is for batch_size={}", batch, problem.batch_size));
  if (!kv_lens) throw Error(Status::InvalidArgument, "kv_lens is null; a host_lengths plan needs every length");
  int64_t total = 0;
  int max_rows = 0;
  std::vector<int> rows(batch);
  for (int b = 0; b < batch; ++b) {
    if (kv_lens[b] < 0)
      throw Error(Status::InvalidArgument,
                  fmt::format("kv_lens[{}]={} is not allowed; a length is >= 0 (0: no KV, o = 0 and lse = -inf)", b,
                              kv_lens[b]));
    rows[b] = batch_decode_rows(problem, kv_lens[b]);
    total += rows[b];
    max_rows = std::max(max_rows, rows[b]);
  }
  BatchDecodePartition part;
  part.batch = batch;
  part.chunk_size = chunk_for(total, max_rows, layout);
  const int chunk = part.chunk_size;
  // Chunks of `chunk` rows (a request's last one shorter), longest first
  // (stable: equal chunks stay in request order), then the tail cut finer
  // where that fills the last round (even pieces per request would leave a
  // long piece holding a slot the short requests need). A request with no
  // KV gets one empty item: its CTA writes o = 0 and lse = -inf.
  std::vector<kernels::DecodeWorkItem> chunks;
  chunks.reserve(layout.max_items);
  for (int b = 0; b < batch; ++b)
    for (int c = 0; c == 0 || c * chunk < rows[b]; ++c)
      chunks.push_back({b, c * chunk, std::min(rows[b], (c + 1) * chunk), -1});
  const auto longest_first = [](const auto& a, const auto& b) { return a.end - a.begin > b.end - b.begin; };
  std::stable_sort(chunks.begin(), chunks.end(), longest_first);
  const int n = static_cast<int>(chunks.size());
  const TailCut cut = choose_tail_cut(chunks, layout, layout.max_items - n);
  part.items.reserve(layout.max_items);
  part.items.assign(chunks.begin(), chunks.end() - cut.tail);
  for (int i = n - cut.tail; i < n; ++i)
    cut_rows(chunks[i].begin, chunks[i].end, cut.pieces, layout.rows_per_iter, [&](int b, int e) {
      part.items.push_back({chunks[i].request, b, e, -1});
    });
  std::stable_sort(part.items.begin() + (n - cut.tail), part.items.end(), longest_first);
  part.num_items = static_cast<int>(part.items.size());
  if (part.num_items > layout.max_items)  // the header's bound; a breach is a planner bug
    throw Error(Status::Internal, fmt::format("batch decode partition has {} items, above its bound {}", part.num_items,
                                              layout.max_items));

  // A request of several items has one partial slot per item.
  part.merge_indptr.assign(size_t(problem.batch_size) + 1, 0);
  for (const auto& w : part.items) ++part.merge_indptr[w.request + 1];
  for (int b = 0; b < batch; ++b)
    if (part.merge_indptr[b + 1] == 1) part.merge_indptr[b + 1] = 0;
  for (int b = 0; b < problem.batch_size; ++b) part.merge_indptr[b + 1] += part.merge_indptr[b];
  std::vector<int> next(part.merge_indptr.begin(), part.merge_indptr.end() - 1);
  for (auto& w : part.items)
    w.slot = part.merge_indptr[w.request + 1] > part.merge_indptr[w.request] ? next[w.request]++ : -1;
  part.num_slots = part.merge_indptr[batch];
  if (graph) part.items.resize(layout.max_items, kernels::DecodeWorkItem{-1, 0, 0, -1});
  return part;
}

nlohmann::json BatchDecodeLayout::to_json() const {
  return {{"kernels", kernels_json(decode, merge)},
          {"max_work_items", max_items},
          {"ctas_per_item", ctas_per_item},
          {"wave", wave},
          {"uniform_splits", uniform_splits},
          {"uniform_chunk", uniform_chunk},
          {"prefetch_rows", prefetch_rows},
          {"prefetch_items", prefetch_items},
          {"workspace", workspace.to_json()}};
}

}  // namespace attnjit::ops

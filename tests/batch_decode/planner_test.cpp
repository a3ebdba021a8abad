// Batch decode's host pieces: the problem's JSON form and validation, the
// kernel choice (a paged KV source in the spec's identity), and the
// planner's partitions -- every KV row covered exactly once, balanced, split
// only when the batch does not fill the GPU, and a fixed grid in CUDA-graph
// mode. No GPU needed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>

#include "attnjit/error.hpp"
#include "ops/batch_decode/batch_decode_planner.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"
#include "ops/single_decode/single_decode_planner.hpp"

using namespace attnjit;

namespace {

BatchDecodeProblem base_problem(int batch, int hq = 32, int hkv = 8, bool tc = true) {
  BatchDecodeProblem p;
  p.batch_size = batch;
  p.num_qo_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = 128;
  p.page_size = 16;
  p.q_dtype = p.kv_dtype = p.o_dtype = DType::BF16;
  p.options.use_tensor_cores = tc;
  return p;
}

// Every request's rows [0, rows) covered once by its items; slots consistent
// with merge_indptr (a split request's slots are exactly its items, which
// the in-kernel merge counts); a request of one item writes o directly.
void check_cover(const BatchDecodeProblem& p, const ops::BatchDecodeLayout& L, const ops::BatchDecodePartition& part,
                 const std::vector<int32_t>& lens) {
  const int batch = static_cast<int>(lens.size());
  REQUIRE(part.num_items <= L.max_items);
  std::map<int, std::vector<std::pair<int, int>>> by_request;
  std::vector<int> slots_seen;
  for (int i = 0; i < part.num_items; ++i) {
    const auto& w = part.items[i];
    REQUIRE(w.request >= 0);
    REQUIRE(w.request < batch);
    CHECK(w.begin < w.end);
    CHECK(w.end - w.begin <= part.chunk_size);
    by_request[w.request].emplace_back(w.begin, w.end);
    const int n_slots = part.merge_indptr[w.request + 1] - part.merge_indptr[w.request];
    if (w.slot < 0) {
      CHECK(n_slots == 0);
    } else {
      CHECK(w.slot >= part.merge_indptr[w.request]);
      CHECK(w.slot < part.merge_indptr[w.request + 1]);
      slots_seen.push_back(w.slot);
    }
  }
  for (size_t i = part.num_items; i < part.items.size(); ++i) CHECK(part.items[i].request == -1);
  for (int b = 0; b < batch; ++b) {
    INFO("request " << b << " length " << lens[b]);
    auto chunks = by_request[b];
    std::sort(chunks.begin(), chunks.end());
    int next = 0;
    for (auto [begin, end] : chunks) {
      CHECK(begin == next);
      next = end;
    }
    CHECK(next == ops::batch_decode_rows(p, lens[b]));
    const int n_slots = part.merge_indptr[b + 1] - part.merge_indptr[b];
    CHECK((chunks.size() == 1 ? n_slots == 0 : n_slots == int(chunks.size())));
  }
  std::sort(slots_seen.begin(), slots_seen.end());
  CHECK(std::adjacent_find(slots_seen.begin(), slots_seen.end()) == slots_seen.end());
  CHECK(int(slots_seen.size()) == part.num_slots);
  CHECK(part.num_slots <= L.max_slots);
  for (size_t b = batch; b + 1 < part.merge_indptr.size(); ++b) CHECK(part.merge_indptr[b + 1] == part.merge_indptr[b]);
}

}  // namespace

TEST_CASE("batch decode: a full batch is not split; a small one is cut to fill a wave", "[batch_decode][planner]") {
  ops::DeviceFigures h100;
  // 32 x 4096 is 256 CTAs of a 264-CTA wave: cutting it to fill the last 8
  // would double its items (chunk_for's 1/16 margin).
  for (auto [batch, len] : std::vector<std::pair<int, int>>{{64, 4096}, {256, 1024}, {32, 4096}}) {
    const auto p = base_problem(batch);
    const auto L = ops::plan_batch_decode(p, h100);
    const std::vector<int32_t> lens(batch, len);
    const auto part = ops::partition_batch_decode(p, L, lens.data(), batch);
    check_cover(p, L, part, lens);
    CHECK(part.num_items == batch);  // batch x kv_heads CTAs already fill the GPU
    CHECK(part.num_slots == 0);  // nothing split
  }
  const auto p = base_problem(1);
  const auto L = ops::plan_batch_decode(p, h100);
  const std::vector<int32_t> lens = {32768};
  const auto part = ops::partition_batch_decode(p, L, lens.data(), 1);
  check_cover(p, L, part, lens);
  CHECK(part.num_slots > 0);
  // About one wave of CTAs, never more than one wave plus a CTA row.
  CHECK(part.num_items * L.ctas_per_item >= L.wave / 2);
  CHECK(part.num_items * L.ctas_per_item <= L.wave + L.ctas_per_item);
}

TEST_CASE("batch decode: host lengths give one in-kernel merge counter per row group, in the int part",
          "[batch_decode][planner]") {
  // Row groups: requests x KV heads x the CTAs along grid x (kernels/decode_work.cuh's decode_row_group).
  for (auto [group, tokens] : std::vector<std::pair<int, int>>{{4, 1}, {8, 1}, {8, 4}}) {
    INFO("group " << group << ", " << tokens << " tokens per request");
    auto p = base_problem(48);
    p.num_qo_heads = p.num_kv_heads * group;
    p.q_len_per_req = tokens;
    const auto L = ops::plan_batch_decode(p, {});
    if (tokens > 1) CHECK(L.decode.shape.grid[0] > 1);  // token tiles along x: several groups per KV head
    REQUIRE(L.workspace.has("merge_counters"));
    const auto& r = L.workspace.region("merge_counters");
    CHECK(r.is_int);  // plan() uploads the int part, counters as zeros
    CHECK(r.bytes == size_t(48) * p.num_kv_heads * L.decode.shape.grid[0] * sizeof(int32_t));
  }
}

TEST_CASE("batch decode: the first wave's items warm their first rows in L2, within 16 MiB", "[batch_decode][planner]") {
  ops::DeviceFigures h100;  // 132 SMs: a wave of 264 CTAs, 33 items of 8 KV heads
  for (bool host : {true, false}) {
    for (DType kv : {DType::BF16, DType::E4M3}) {
      INFO((host ? "host" : "device") << " lengths, " << to_string(kv));
      auto p = base_problem(64);
      p.kv_dtype = kv;
      p.host_lengths = host;
      p.max_seq_len = 4096;
      const auto L = ops::plan_batch_decode(p, h100);
      CHECK(L.prefetch_items == 33);  // the second wave starts long after the wait
      // bf16: 264 CTAs x 128 rows would pass 16 MiB.
      CHECK(L.prefetch_rows == (kv == DType::E4M3 ? 128 : (16 << 20) / (264 * 512)));
      // fp8 warms nothing in a launch of two waves (64 items), bf16 still does.
      CHECK(ops::batch_decode_warmed_rows(p, L, 64) == (kv == DType::E4M3 ? 0 : L.prefetch_rows));
      CHECK(ops::batch_decode_warmed_rows(p, L, 33) == L.prefetch_rows);
      const int64_t row_bytes = 2 * 128 * int64_t(dtype_size(kv));
      CHECK(int64_t(L.prefetch_rows) * row_bytes * L.prefetch_items * p.num_kv_heads <= (16 << 20));
      CHECK(L.to_json().at("prefetch_items") == 33);
    }
  }
  // Fewer items than a wave: all of them.
  auto one = base_problem(1);
  one.host_lengths = false;
  one.max_seq_len = 2048;
  const auto L = ops::plan_batch_decode(one, h100);
  CHECK(L.prefetch_items == L.max_items);
  // MHA on a fine-grained split: the 16 MiB bound, not 128 rows, sets it.
  auto mha = base_problem(2, 32, 32);
  mha.host_lengths = false;
  mha.max_seq_len = 65536;
  const auto M = ops::plan_batch_decode(mha, h100);
  CHECK(M.prefetch_rows > 0);
  CHECK(int64_t(M.prefetch_rows) * 2 * 128 * 2 * M.prefetch_items * 32 <= (16 << 20));
}

TEST_CASE("batch decode: a skewed batch is balanced, longest chunks first", "[batch_decode][planner]") {
  const auto p = base_problem(64);
  const auto L = ops::plan_batch_decode(p, {});
  std::vector<int32_t> lens(64, 512);
  lens[17] = 32768;
  const auto part = ops::partition_batch_decode(p, L, lens.data(), 64);
  check_cover(p, L, part, lens);
  // No chunk is longer than a wave's share of all the rows (rounded to the tile).
  const int64_t total = 32768 + 63 * 512;
  const int64_t share = (total * L.ctas_per_item + L.wave - 1) / L.wave;
  CHECK(part.chunk_size <= share + L.rows_per_iter);
  CHECK(part.chunk_size < 32768 / 8);  // the long request is cut into many chunks
  CHECK(part.merge_indptr[18] - part.merge_indptr[17] >= 8);
  CHECK(part.num_slots == part.merge_indptr[18] - part.merge_indptr[17]);  // only it is split
  for (int i = 1; i < part.num_items; ++i)
    CHECK(part.items[i - 1].end - part.items[i - 1].begin >= part.items[i].end - part.items[i].begin);
}

TEST_CASE("batch decode: a last round of a few long items is cut finer; a nearly full one is left whole",
          "[batch_decode][planner]") {
  // One wave runs 33 items (264 CTAs of 8 KV heads). 34 x 4096 would run its
  // last request alone, at a fraction of the bandwidth; 100 x 2000 and
  // 40 x 4096 likewise. 256 x 1024's last round has 25 items, enough to
  // stream at full rate, and 512 x 512's 17: cutting them only adds items.
  struct Case {
    int batch, len;
    bool cut;
  };
  for (const auto& c : std::vector<Case>{{34, 4096, true}, {100, 2000, true}, {40, 4096, true},
                                         {256, 1024, false}, {512, 512, false}, {64, 4096, false}}) {
    for (const bool graph : {false, true}) {
      INFO(c.batch << " x " << c.len << (graph ? ", CUDA graph" : ""));
      auto p = base_problem(c.batch);
      p.options.use_cuda_graph = graph;
      const auto L = ops::plan_batch_decode(p, {});
      REQUIRE(L.wave / L.ctas_per_item == 33);
      const std::vector<int32_t> lens(c.batch, c.len);
      const auto part = ops::partition_batch_decode(p, L, lens.data(), c.batch);
      check_cover(p, L, part, lens);
      if (!c.cut) {
        CHECK(part.num_items == c.batch);
        CHECK(part.num_slots == 0);
        continue;
      }
      CHECK(part.num_items > c.batch);
      // Whole requests first, then the cut ones' pieces, longest first; the
      // cut requests are split (slots), the others are not.
      int whole = 0;
      while (whole < part.num_items && part.items[whole].end - part.items[whole].begin == c.len) ++whole;
      CHECK(whole >= 33);  // at least one full round stays whole
      CHECK(whole < c.batch);
      for (int i = whole; i < part.num_items; ++i) {
        const auto& w = part.items[i];
        CHECK(w.end - w.begin < c.len);
        CHECK(w.slot >= 0);
        if (i > whole) CHECK(part.items[i - 1].end - part.items[i - 1].begin >= w.end - w.begin);
      }
      CHECK(part.num_slots == part.num_items - whole);
    }
  }
}

TEST_CASE("batch decode: random batches and windows are covered exactly once", "[batch_decode][planner]") {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int batch = 1 + rng() % 300;
    auto p = base_problem(batch, 8 * (1 + rng() % 4), 8, rng() % 2);
    p.options.window_left = rng() % 3 == 0 ? int(rng() % 2000) : -1;
    const auto L = ops::plan_batch_decode(p, {});
    std::vector<int32_t> lens(batch);
    for (auto& n : lens) n = rng() % 5 == 0 ? 1 + rng() % 40000 : 1 + rng() % 700;
    INFO("trial " << trial << " batch " << batch);
    check_cover(p, L, ops::partition_batch_decode(p, L, lens.data(), batch), lens);
  }
}

TEST_CASE("batch decode: CUDA-graph mode keeps one grid and workspace for every batch up to the maximum",
          "[batch_decode][planner][graph]") {
  auto p = base_problem(128);
  p.options.use_cuda_graph = true;
  const auto L = ops::plan_batch_decode(p, {});
  CHECK(L.decode.shape.grid[2] == uint32_t(L.max_items));
  CHECK_FALSE(L.merge);  // host lengths: split requests merge in the decode kernel, whatever the batch
  std::vector<int32_t> a(3, 20000), b(128, 300);
  b[5] = 9000;
  for (const auto* lens : {&a, &b}) {
    const int batch = static_cast<int>(lens->size());
    const auto part = ops::partition_batch_decode(p, L, lens->data(), batch);
    check_cover(p, L, part, *lens);
    CHECK(part.items.size() == size_t(L.max_items));  // padded: the grid does not change
    CHECK(part.merge_indptr.size() == size_t(129));
  }
  CHECK_THROWS_WITH(ops::partition_batch_decode(p, L, b.data(), 129),
                    Catch::Contains("batch=129 is not allowed; this CUDA-graph plan allows 1 to 128"));
  // The same problem plans to the same launch shapes and regions whatever the batch.
  const auto L2 = ops::plan_batch_decode(p, {});
  CHECK(L2.workspace.to_json() == L.workspace.to_json());
}

TEST_CASE("batch decode: lengths only on the device give a fixed uniform split", "[batch_decode][planner]") {
  auto p = base_problem(2);
  p.page_table = PageTable::BlockTable;
  p.host_lengths = false;
  p.max_seq_len = 32768;
  const auto L = ops::plan_batch_decode(p, {});
  CHECK(L.uniform_splits > 1);
  CHECK(int64_t(L.uniform_splits) * L.uniform_chunk >= 32768);
  CHECK(L.max_items == 2 * L.uniform_splits);
  CHECK_FALSE(L.workspace.has("work"));  // the kernel derives its item from blockIdx.y
  CHECK_FALSE(L.workspace.has("merge_counters"));  // no plan() to zero them: the merge kernel merges
  CHECK(L.merge);
  CHECK(ops::batch_decode_kernels(p).size() == 2);  // prewarm: decode and merge
  CHECK(L.decode.spec.as<DecodeKernel>()->kv_source == KVSourceKind::BlockTable);
  p.batch_size = 256;
  p.max_seq_len = 1024;
  const auto full = ops::plan_batch_decode(p, {});
  CHECK(full.uniform_splits == 1);
  CHECK(full.workspace.float_bytes() + full.workspace.int_bytes() == 0);
  CHECK_FALSE(full.merge);  // nothing split, nothing merged
  p.host_lengths = true;
  CHECK(ops::batch_decode_kernels(p).size() == 1);  // host lengths: the decode kernel merges itself
}

TEST_CASE("batch decode: lengths only on the device split a batch whose last round would run a few requests alone",
          "[batch_decode][planner]") {
  // 34 x 4096, 8 KV heads: 33 requests fill a wave, the 34th would run
  // alone; four chunks each (and the merge kernel) finish sooner under the
  // model. 64 x 4096 and 256 x 1024 end with full-rate rounds: unsplit.
  for (auto [batch, len, split] : std::vector<std::tuple<int, int, bool>>{
           {34, 4096, true}, {40, 4096, true}, {64, 4096, false}, {256, 1024, false}, {34, 600, false}}) {
    INFO(batch << " x " << len);
    auto p = base_problem(batch);
    p.page_table = PageTable::BlockTable;
    p.host_lengths = false;
    p.max_seq_len = len;
    const auto L = ops::plan_batch_decode(p, {});
    REQUIRE(L.wave / L.ctas_per_item == 33);
    CHECK((L.uniform_splits > 1) == split);
    CHECK(L.merge.has_value() == split);
    CHECK(int64_t(L.uniform_splits) * L.uniform_chunk >= len);
    CHECK(L.uniform_chunk % L.rows_per_iter == 0);
    CHECK(L.max_items == batch * L.uniform_splits);
  }
}

TEST_CASE("batch decode problems round-trip through JSON; bad fields name argument, value and what is allowed",
          "[batch_decode][contract]") {
  auto p = base_problem(7, 40, 8, false);
  p.kv_dtype = DType::E4M3;
  p.page_size = 1;
  p.options.kv_layout = KVLayout::HND;
  p.options.window_left = 99;
  p.options.logits_soft_cap = 30.f;
  p.options.use_cuda_graph = true;
  const auto j = ops::to_json(p);
  CHECK(ops::to_json(ops::batch_decode_problem_from_json(j)) == j);
  auto bad = [&](const char* key, nlohmann::json value, const char* message) {
    auto b = j;
    b[key] = value;
    INFO(key);
    CHECK_THROWS_WITH(ops::batch_decode_problem_from_json(b), Catch::Contains(message));
  };
  bad("batch_size", 0, "batch_size=0 is not allowed; allowed: 1 to 32768");
  bad("page_size", 0, "page_size=0 is not allowed; allowed: 1 to 65536");
  bad("num_kv_heads", 7, "num_qo_heads=40 is not allowed; it must be a multiple of num_kv_heads=7");
  bad("kv_dtype", "float32", "kv_cache.dtype=float32 is not supported; allowed:");
  bad("kv_dtype", "float16", "kv_cache.dtype=float16 is not allowed with q.dtype=bfloat16");
  bad("o_dtype", "float16", "out.dtype=float16 is not supported with q.dtype=bfloat16");
  bad("page_table", "radix", "problem.page_table='radix' is not allowed; allowed: indptr, block_table");
  bad("window_left", -2, "window_left=-2 is not allowed");
  bad("pages", 3, "problem.pages is not a batch_decode field");
  bad("host_lengths", false, "max_seq_len=0 is not allowed when the lengths are only on the device");
  CHECK_THROWS_WITH(ops::batch_decode_problem_from_json({{"op", "batch_decode"}, {"num_qo_heads", 8}, {"head_dim", 64}}),
                    Catch::Contains("problem.num_kv_heads is missing"));
  const auto q = base_problem(2);
  const auto L = ops::plan_batch_decode(q, {});
  const std::vector<int32_t> lens = {5, -1};  // 0 is a request without KV (tests/refused_features/planner_test.cpp)
  CHECK_THROWS_WITH(ops::partition_batch_decode(q, L, lens.data(), 2),
                    Catch::Contains("kv_lens[1]=-1 is not allowed; a length is >= 0"));
  CHECK_THROWS_WITH(ops::partition_batch_decode(q, L, lens.data(), 3),
                    Catch::Contains("batch=3 is not allowed; this plan is for batch_size=2"));
}

TEST_CASE("decode specs carry the KV source in their identity and JSON", "[batch_decode][spec]") {
  auto p = base_problem(4);
  const auto paged = ops::batch_decode_kernels(p).at(0);
  p.page_table = PageTable::BlockTable;
  const auto table = ops::batch_decode_kernels(p).at(0);
  CHECK(paged.identity() != table.identity());
  CHECK(paged.to_json().at("kv_source") == "paged");
  CHECK(table.name().find("_blocktable") != std::string::npos);
  CHECK(KernelSpec::from_json(table.to_json()) == table);
  auto j = table.to_json();
  j["kv_source"] = "ragged";
  CHECK_THROWS_WITH(KernelSpec::from_json(j),
                    Catch::Contains("kv_source='ragged' is not supported; allowed: contiguous, paged, block_table"));
}

TEST_CASE("decode grids: x head blocks, y KV heads, z work items (the work list's order holds across heads)",
          "[batch_decode][planner]") {
  // CTAs start in x, y, z order (kernels/decode_work.cuh): every head of an
  // item starts before the next item, so the longest-first items go first.
  auto p = base_problem(64);
  const auto L = ops::plan_batch_decode(p, {});
  CHECK(L.decode.shape.grid[1] == uint32_t(p.num_kv_heads));
  CHECK(L.decode.shape.grid[2] == uint32_t(L.max_items));

  SingleDecodeProblem s;
  s.num_qo_heads = 32;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.kv_len = 32768;
  const auto S = ops::plan_single_decode(s, {});
  CHECK(S.decode.shape.grid[1] == 8u);
  CHECK(S.decode.shape.grid[2] == uint32_t(S.num_splits));
  CHECK(S.num_splits > 1);
}

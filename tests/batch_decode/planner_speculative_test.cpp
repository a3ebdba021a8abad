// Speculative decoding in batch decode (several query tokens per request),
// host side: the kernel choice (tensor cores, causal mask, heads x tokens per
// CTA within the 16-row MMA tile), the grid, merge and workspace sizes, the
// partition's window, the problem's and spec's validation, and the
// TensorRT-LLM entry's argument checks that run before any device call. The
// kernels themselves: tests/batch_decode/gpu_speculative_test.cpp.
#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <tuple>

#include "attnjit/batch_decode.hpp"
#include "attnjit/error.hpp"
#include "attnjit/runtime.hpp"
#include "ops/operator_entries.hpp"
#include "ops/batch_decode/batch_decode_planner.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"
#include "reference/decode_reference.hpp"
#include "spec/kernel_spec.hpp"

using namespace attnjit;
using Catch::Contains;

namespace {

BatchDecodeProblem spec_problem(int batch, int group, int q_len, int d = 128, bool tc = false) {
  BatchDecodeProblem p;
  p.batch_size = batch;
  p.num_kv_heads = 2;
  p.num_qo_heads = 2 * group;
  p.head_dim = d;
  p.page_size = 16;
  p.page_table = PageTable::BlockTable;
  p.host_lengths = false;
  p.max_seq_len = 4096;
  p.q_dtype = p.kv_dtype = p.o_dtype = DType::BF16;
  p.options.kv_layout = KVLayout::HND;
  p.options.use_tensor_cores = tc;
  p.q_len_per_req = q_len;
  return p;
}

const DecodeKernel& decode_of(const ops::BatchDecodeLayout& L) { return *L.decode.spec.as<DecodeKernel>(); }

std::string error_of(const std::function<void()>& f, Status want) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.status() == want);
    return e.what();
  }
  FAIL("no error");
  return "";
}

}  // namespace

TEST_CASE("speculative decode: the planner takes tensor cores and tiles heads x tokens into 16 rows",
          "[batch_decode][speculative][planner]") {
  for (int group : {1, 2, 4, 5, 7, 8, 16, 32})
    for (int q_len = 1; q_len <= 9; ++q_len)
      for (bool tc : {false, true}) {
        INFO("group " << group << " q_len " << q_len << " use_tensor_cores " << tc);
        const auto p = spec_problem(3, group, q_len, 128, tc);
        const auto L = ops::plan_batch_decode(p, {});
        const DecodeKernel& k = decode_of(L);
        CHECK_NOTHROW(KernelSpec(k).validate());
        if (q_len > 1) {
          CHECK(k.tensor_cores);  // by itself: the CUDA-core skeleton has one query row per head
          CHECK(k.variant.mask == MaskMode::Causal);
        } else {
          CHECK(k.variant.mask == MaskMode::None);
          CHECK(k.tokens_per_cta == 1);
        }
        if (k.tensor_cores) CHECK(k.heads_per_cta * k.tokens_per_cta <= 16);
        CHECK(group % k.heads_per_cta == 0);
        const int tiles = (q_len + k.tokens_per_cta - 1) / k.tokens_per_cta;
        CHECK(int(L.decode.shape.grid[0]) == group / k.heads_per_cta * tiles);
        CHECK(L.ctas_per_item == 2 * int(L.decode.shape.grid[0]));
        REQUIRE(L.merge);  // lengths on the device, split: the merge kernel
        CHECK(int(L.merge->shape.grid[0]) == 3 * q_len * 2 * group);  // (request, token, head) rows
      }
  // The brief's example and the awkward primes: whole groups where they fit,
  // then as few sibling CTAs as the 16 rows allow.
  auto tile = [](int group, int q_len) {
    const auto L = ops::plan_batch_decode(spec_problem(1, group, q_len), {});
    return std::tuple{decode_of(L).heads_per_cta, decode_of(L).tokens_per_cta, int(L.decode.shape.grid[0])};
  };
  CHECK(tile(8, 4) == std::tuple{8, 2, 2});   // 32 rows: two CTAs of 8 heads x 2 tokens
  CHECK(tile(5, 4) == std::tuple{5, 2, 2});   // 20 rows: two CTAs, not five of one head
  CHECK(tile(5, 3) == std::tuple{5, 3, 1});   // 15 rows fit
  CHECK(tile(1, 4) == std::tuple{1, 4, 1});
  CHECK(tile(4, 4) == std::tuple{4, 4, 1});
  CHECK(tile(7, 3) == std::tuple{7, 2, 2});
  CHECK(tile(1, 20) == std::tuple{1, 10, 2});  // balanced tiles: 10 + 10, not 16 + 4
  CHECK(tile(32, 2) == std::tuple{16, 1, 4});
}

TEST_CASE("speculative decode: one token per request keeps the decode specs it had", "[batch_decode][speculative]") {
  for (int group : {1, 4, 5, 8, 16}) {
    INFO("group " << group);
    auto p = spec_problem(2, group, 1, 128, true);
    const auto one = ops::batch_decode_kernels(p).at(0);
    const auto j = one.to_json();
    CHECK_FALSE(j.contains("tokens_per_cta"));
    CHECK(j.at("mask") == "none");
    CHECK(one.name().find("_causal") == std::string::npos);
    p.q_len_per_req = 2;
    const auto two = ops::batch_decode_kernels(p).at(0);
    CHECK(two.identity() != one.identity());
    CHECK(two.to_json().at("mask") == "causal");
    CHECK(two.name().find("_causal") != std::string::npos);
    CHECK(KernelSpec::from_json(two.to_json()) == two);
  }
}

TEST_CASE("speculative decode: partial states, merge rows and windows grow with the query tokens",
          "[batch_decode][speculative][planner]") {
  auto p = spec_problem(1, 4, 1);
  p.max_seq_len = 32768;  // one long request: split
  const auto L1 = ops::plan_batch_decode(p, {});
  REQUIRE(L1.uniform_splits > 1);
  p.q_len_per_req = 3;
  const auto L3 = ops::plan_batch_decode(p, {});
  CHECK(L3.workspace.region("partial_o").bytes >= 3 * size_t(L3.max_slots) * 8 * 128 * 4);
  CHECK(L3.workspace.region("partial_lse").bytes >= 3 * size_t(L3.max_slots) * 8 * 4);
  // Per-request lengths size everything by max_q_len.
  p.q_len_per_req = 1;
  p.max_q_len = 3;
  const auto Lv = ops::plan_batch_decode(p, {});
  CHECK(Lv.workspace.to_json() == L3.workspace.to_json());
  REQUIRE(Lv.merge);
  REQUIRE(L3.merge);
  CHECK(Lv.merge->shape.grid[0] == L3.merge->shape.grid[0]);

  // The first token's window starts q_len - 1 rows before the last one's.
  p.max_q_len = 0;
  p.q_len_per_req = 4;
  p.options.window_left = 100;
  CHECK(ops::batch_decode_rows(p, 50) == 50);
  CHECK(ops::batch_decode_rows(p, 5000) == 104);
  p.q_len_per_req = 1;
  CHECK(ops::batch_decode_rows(p, 5000) == 101);
}

TEST_CASE("speculative decode: host-length partitions cover each request's window once", "[batch_decode][speculative]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    const int batch = 1 + rng() % 50;
    auto p = spec_problem(batch, 1 + rng() % 8, 1 + rng() % 6);
    p.page_table = PageTable::IndptrIndices;
    p.host_lengths = true;
    p.options.window_left = rng() % 2 ? int(rng() % 300) : -1;
    const auto L = ops::plan_batch_decode(p, {});
    std::vector<int32_t> lens(batch);
    for (auto& n : lens) n = 6 + rng() % 9000;
    const auto part = ops::partition_batch_decode(p, L, lens.data(), batch);
    INFO("trial " << trial);
    std::vector<int> covered(batch, 0);
    for (int i = 0; i < part.num_items; ++i) covered[part.items[i].request] += part.items[i].end - part.items[i].begin;
    for (int b = 0; b < batch; ++b) CHECK(covered[b] == ops::batch_decode_rows(p, lens[b]));
  }
}

TEST_CASE("speculative decode: problems refuse what the kernel cannot do, naming the values",
          "[batch_decode][speculative][contract]") {
  auto p = spec_problem(4, 4, 2);
  auto j = ops::to_json(p);
  CHECK(j.at("q_len_per_req") == 2);
  CHECK(ops::to_json(ops::batch_decode_problem_from_json(j)) == j);
  CHECK_FALSE(ops::to_json(spec_problem(4, 4, 1)).contains("q_len_per_req"));
  auto bad = [&](const char* key, nlohmann::json value, const char* message) {
    auto b = j;
    b[key] = value;
    INFO(key << "=" << value.dump());
    CHECK_THROWS_WITH(ops::batch_decode_problem_from_json(b), Contains(message));
  };
  bad("q_len_per_req", 0, "q_len_per_req=0 is not allowed; allowed: 1 to 64 query tokens per request");
  bad("q_len_per_req", 65, "q_len_per_req=65 is not allowed; allowed: 1 to 64");
  bad("max_q_len", -1, "max_q_len=-1 is not allowed; allowed: 0 (every request has q_len_per_req tokens) or 1 to 64");
  bad("max_q_len", 3, "q_len_per_req=2 is not allowed with max_q_len=3 (per-request query lengths); allowed: 1 or 3");
  {
    auto b = j;
    b["max_q_len"] = 2;  // q_len_per_req equal to it: accepted
    CHECK_NOTHROW(ops::batch_decode_problem_from_json(b));
  }
  // Several tokens at head_dim 256 and 512 run on CUDA cores (tokens x heads a CTA).
  for (int d : {256, 512}) {
    auto wide = spec_problem(4, 4, 3, d);
    CHECK_NOTHROW(ops::validate(wide));
    wide.q_len_per_req = 1;
    wide.max_q_len = 2;
    CHECK_NOTHROW(ops::validate(wide));
  }
}

TEST_CASE("speculative decode: query rows against q_len_per_req and cum_seq_lens_q", "[batch_decode][speculative]") {
  auto p = spec_problem(4, 4, 3);
  CHECK(ops::query_token_rows(p, 4, 12, false) == 12);
  CHECK_THAT(error_of([&] { ops::query_token_rows(p, 4, 12, true); }, Status::InvalidArgument),
             Contains("cum_seq_lens_q is set but this problem has uniform query lengths (max_q_len=0)"));
  p.q_len_per_req = 1;
  p.max_q_len = 3;
  CHECK(ops::query_token_rows(p, 4, 7, true) == 7);
  CHECK(ops::query_token_rows(p, 4, 12, true) == 12);
  CHECK_THAT(error_of([&] { ops::query_token_rows(p, 4, 13, true); }, Status::InvalidArgument),
             Contains("q: 13 token rows is not allowed with batch=4 and max_q_len=3; allowed: 1 to 12"));
  CHECK_THAT(error_of([&] { ops::query_token_rows(p, 4, 7, false); }, Status::InvalidArgument),
             Contains("cum_seq_lens_q is null; this problem has per-request query lengths (max_q_len=3)"));
}

TEST_CASE("speculative decode: decode specs validate rows, tokens and mask", "[batch_decode][speculative][spec]") {
  DecodeKernel s;
  s.head_dim = 128;
  s.variant.q_dtype = s.variant.kv_dtype = s.variant.o_dtype = DType::BF16;
  s.tensor_cores = true;
  s.variant.mask = MaskMode::Causal;
  s.heads_per_cta = 8;
  s.tokens_per_cta = 2;
  CHECK_NOTHROW(s.validate());
  CHECK(KernelSpec::from_json(KernelSpec(s).to_json()) == KernelSpec(s));
  CHECK(s.name().find("_t2") != std::string::npos);
  auto refused = [](DecodeKernel k) { return error_of([&] { k.validate(); }, Status::InvalidArgument); };
  auto k = s;
  k.tokens_per_cta = 4;
  CHECK_THAT(refused(k), Contains("decode spec.heads_per_cta=8 x tokens_per_cta=4 = 32 query rows is not supported; "
                                  "allowed: at most 16 (one tensor-core M tile)"));
  k = s;
  k.variant.mask = MaskMode::None;
  CHECK_THAT(refused(k), Contains("decode spec.tokens_per_cta=2 needs mask=causal"));
  k = s;
  k.tensor_cores = false;
  k.heads_per_cta = 4;
  CHECK_NOTHROW(k.validate());  // several tokens on CUDA cores: 2 x 4 rows
  k.heads_per_cta = 5;
  CHECK_THAT(refused(k), Contains("= 10 query rows is not supported on CUDA cores; allowed: at most 8"));
  k.heads_per_cta = 4;
  k.variant.mask = MaskMode::None;
  CHECK_THAT(refused(k), Contains("decode spec.tokens_per_cta=2 needs mask=causal or draft"));
  k = s;
  k.variant.mask = MaskMode::Custom;
  CHECK_THAT(refused(k), Contains("decode spec.mask=custom is not supported"));
  k = s;
  k.tokens_per_cta = 17;
  CHECK_THAT(refused(k), Contains("decode spec.tokens_per_cta=17 is not supported; allowed: 1 to 16"));
  auto j = KernelSpec(s).to_json();
  j["tokens_per_cta"] = 3;
  j["heads_per_cta"] = 6;
  CHECK_THROWS_WITH(KernelSpec::from_json(j), Contains("heads_per_cta=6 x tokens_per_cta=3 = 18 query rows"));
}

TEST_CASE("TensorRT-LLM batch decode checks q_len_per_req, max_q_len and cum_seq_lens_q before the device",
          "[batch_decode][speculative][input]") {
  Runtime rt;
  void* fake = reinterpret_cast<void*>(uintptr_t{0x7f0000000000});
  const auto* table = static_cast<const int32_t*>(fake);
  // 8 qo / 2 kv heads, d 128, HND pages of 16.
  auto call = [&](int64_t tokens, TrtllmDecodeArgs a) {
    const TensorView q = make_tensor(fake, DType::BF16, {tokens, 8, 128});
    const TensorView kc = make_tensor(fake, DType::BF16, {40, 2, 16, 128});
    a.block_tables = table;
    a.seq_lens = table;
    a.max_pages_per_seq = 10;
    a.max_seq_len = 160;
    return error_of([&] { trtllm_batch_decode_with_kv_cache(rt, q, kc, kc, fake, 128 << 20, a, q); },
                    Status::InvalidArgument);
  };
  TrtllmDecodeArgs a;
  a.q_len_per_req = 3;
  CHECK_THAT(call(10, a), Contains("query: 10 token rows is not allowed with q_len_per_req=3; allowed: a multiple of it"));
  a.q_len_per_req = 0;
  CHECK_THAT(call(10, a), Contains("q_len_per_req=0 is not allowed; allowed: >= 1"));
  a.q_len_per_req = 2;
  a.batch_size = 4;
  CHECK_THAT(call(10, a), Contains("batch_size=4 is not allowed; the query's 10 rows hold 5 requests of q_len_per_req=2"));
  a = {};
  a.max_q_len = 4;
  CHECK_THAT(call(10, a), Contains("max_q_len=4 is not allowed without cum_seq_lens_q; they go together"));
  a = {};
  a.cum_seq_lens_q = table;
  CHECK_THAT(call(10, a), Contains("max_q_len=0 is not allowed with cum_seq_lens_q; they go together"));
  a.max_q_len = 4;
  CHECK_THAT(call(10, a), Contains("batch_size=0 is not allowed with cum_seq_lens_q"));
  a.batch_size = 2;
  CHECK_THAT(call(10, a), Contains("q: 10 token rows is not allowed with batch=2 and max_q_len=4; allowed: 1 to 8"));
  a.max_q_len = 65;
  CHECK_THAT(call(10, a), Contains("max_q_len=65 is not allowed"));
}

TEST_CASE("the batch-decode bench refuses per-request query lengths by name, before the device",
          "[batch_decode][speculative][input]") {
  Runtime rt;
  const nlohmann::json problem = {{"op", "batch_decode"}, {"batch_size", 2},   {"kv_len", 64},    {"num_qo_heads", 8},
                                  {"num_kv_heads", 2},    {"head_dim", 128},   {"max_q_len", 2}};
  CHECK_THAT(error_of([&] { ops::batch_decode_bench(rt, problem, 0, nullptr); }, Status::InvalidArgument),
             Contains("problem.max_q_len=2 is not benchmarked (per-request query lengths); allowed: 0, with "
                      "q_len_per_req tokens for every request"));
}

TEST_CASE("the decode reference at a query position is decode over the keys up to it",
          "[batch_decode][speculative][reference]") {
  // What the GPU tests compare speculative tokens with: token t of q_len at
  // p = L - q_len + t sees [max(0, p - window_left), p], as a one-token
  // decode of the first p + 1 rows (window included) does.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uni(-1, 1);
  const int H = 4, Hk = 2, D = 64, L = 40;
  std::vector<double> q(H * D), k(size_t(L) * Hk * D), v(k.size()), sinks = {0.5, -1, 2, 0};
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = uni(rng);
  for (int window : {-1, 5})
    for (PosEncoding pos : {PosEncoding::None, PosEncoding::Alibi, PosEncoding::RopeLlama})
      for (int p : {0, 17, L - 1}) {
        INFO("window " << window << " pos " << to_string(pos) << " position " << p);
        SingleDecodeProblem sp;
        sp.num_qo_heads = H;
        sp.num_kv_heads = Hk;
        sp.head_dim = D;
        sp.kv_len = L;
        sp.options.window_left = window;
        sp.options.pos_encoding_mode = pos;
        const auto at = test::reference_single_decode(sp, q, k, v, &sinks, int64_t(p));
        sp.kv_len = p + 1;
        const std::vector<double> kp(k.begin(), k.begin() + (p + 1) * Hk * D), vp(v.begin(), v.begin() + (p + 1) * Hk * D);
        const auto cut = test::reference_single_decode(sp, q, kp, vp, &sinks);
        for (size_t i = 0; i < at.o.size(); ++i) CHECK(at.o[i] == Approx(cut.o[i]).margin(1e-12));
        for (int h = 0; h < H; ++h) CHECK(at.lse[h] == Approx(cut.lse[h]).margin(1e-12));
      }
}

// The page helpers without a GPU: the page kernel family's spec (JSON round
// trip, refusals, generated source), the problems from tensors and from JSON
// (every refusal names the argument, its value and what is allowed; the
// access width follows the views' alignment), the planner's launches, and
// the registry entry.
#include <catch2/catch.hpp>

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/error.hpp"
#include "codegen.hpp"
#include "ops/page/page_planner.hpp"
#include "ops/page/page_problem.hpp"
#include "ops/registry.hpp"
#include "spec/kernel_spec.hpp"

using namespace attnjit;
using Catch::Matchers::Contains;

namespace {

// A made-up device address, 256-byte aligned: validation never dereferences it.
char* fake(uintptr_t offset = 0) { return reinterpret_cast<char*>(uintptr_t{0x7f0000000000} + offset); }
const int32_t* fake_ints(uintptr_t offset = 0) { return reinterpret_cast<const int32_t*>(fake(offset)); }

TensorView view(void* data, DType dtype, std::vector<int64_t> shape) {
  return make_tensor(data, dtype, shape, 0);
}

// A valid append: 10 rows of 8 heads x 128 into a 40-page NHD cache of page size 16, 4 requests.
struct Append {
  DType dtype = DType::BF16;
  KVLayout layout = KVLayout::NHD;
  TensorView k = view(fake(), DType::BF16, {10, 8, 128});
  TensorView v = view(fake(1 << 20), DType::BF16, {10, 8, 128});
  TensorView kc = view(fake(2 << 20), DType::BF16, {40, 16, 8, 128});
  TensorView vc = view(fake(4 << 20), DType::BF16, {40, 16, 8, 128});
  PagedKVAppendTable table = [] {
    PagedKVAppendTable t;
    t.batch_indices = fake_ints(8 << 20);
    t.positions = fake_ints(9 << 20);
    t.kv_indices = fake_ints(10 << 20);
    t.num_indices = 12;
    t.kv_indptr = fake_ints(11 << 20);
    t.kv_last_page_len = fake_ints(12 << 20);
    t.batch_size = 4;
    return t;
  }();
  ops::PageAppendProblem problem() const {
    return ops::page_append_problem_from_tensors(k, v, table, kc, vc, layout);
  }
};

void with_dtype(Append& a, DType d) {
  for (TensorView* t : {&a.k, &a.v, &a.kc, &a.vc}) t->dtype = d;
}

}  // namespace

TEST_CASE("the page family's specs round-trip through JSON and refuse bad fields by name", "[page][spec]") {
  const KernelSpec append = ops::page_append_spec(DType::E4M3);
  const KernelSpec positions = ops::batch_positions_spec();
  CHECK(append.name() == "page_append_kv_e1_t256");
  CHECK(positions.name() == "page_batch_positions_t256");
  CHECK(ops::page_append_spec(DType::F16) == ops::page_append_spec(DType::BF16));  // one kernel per width
  CHECK(append.to_json() == nlohmann::json{{"family", "page"}, {"kernel", "append_kv"}, {"elem_bytes", 1},
                                           {"threads", 256}});
  for (const KernelSpec& s : {append, positions}) {
    CHECK(KernelSpec::from_json(s.to_json()) == s);
    CHECK(s.threads() == 256);
    CHECK(s.dynamic_smem_bytes() == 0);
    const TranslationUnit tu = generate(s);
    CHECK_THAT(tu.source, Contains(std::string("extern \"C\" __global__")) && Contains(s.entry_name()));
  }
  auto refused = [](nlohmann::json j) {
    try {
      KernelSpec::from_json(j);
    } catch (const Error& e) {
      CHECK(e.status() == Status::InvalidArgument);
      return std::string(e.what());
    }
    FAIL("accepted " << j.dump());
    return std::string();
  };
  CHECK_THAT(refused({{"family", "page"}, {"kernel", "append_kv"}, {"elem_bytes", 4}}),
             Contains("page spec.elem_bytes=4 is not supported; allowed: 1 (fp8), 2 (float16, bfloat16)"));
  CHECK_THAT(refused({{"family", "page"}, {"kernel", "copy"}}),
             Contains("page spec.kernel='copy' is not a page kernel; allowed: append_kv, batch_positions"));
  CHECK_THAT(refused({{"family", "page"}, {"kernel", "batch_positions"}, {"threads", 96}}),
             Contains("page spec.threads=96 is not supported"));
  CHECK_THAT(refused({{"family", "page"}, {"kernel", "batch_positions"}, {"elem_bytes", 2}}),
             Contains("elem_bytes=2 is not allowed for kernel batch_positions"));
  CHECK_THAT(refused({{"family", "page"}, {"kernel", "append_kv"}, {"elem_bytes", 2}, {"layout", "NHD"}}),
             Contains("page spec.layout is not a field of the page family"));
}

TEST_CASE("append_paged_kv_cache's problem from tensors takes the shapes and refuses what it cannot copy",
          "[page][validation]") {
  Append a;
  const auto p = a.problem();
  CHECK(p.nnz == 10);
  CHECK(p.num_kv_heads == 8);
  CHECK(p.head_dim == 128);
  CHECK(p.page_size == 16);
  CHECK(p.num_pages == 40);
  CHECK(p.batch_size == 4);
  CHECK(p.num_indices == 12);
  CHECK(p.access_bytes == 16);
  CHECK(p.contiguous_rows);

  a.layout = KVLayout::HND;  // [40, 16, 8, 128] read as HND: 16 heads, page size 8
  CHECK_THROWS_WITH(a.problem(), Contains("k_cache: shape [40, 16, 8, 128] has num_kv_heads (shape[1])=16, but "
                                          "append_key has 8; they must be equal"));
  a.kc.shape = a.vc.shape = {40, 8, 16, 128};
  a.kc.strides = a.vc.strides = {16 * 8 * 128, 16 * 128, 128, 1};
  CHECK(a.problem().page_size == 16);

  auto refused = [](const Append& x) {
    try {
      x.problem();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    FAIL("accepted");
    return std::string();
  };
  // One field spoiled at a time: refused, naming it.
  const std::vector<std::pair<std::function<void(Append&)>, std::string>> spoiled = {
      {[&](Append& b) { with_dtype(b, DType::F32); },
       "append_key: dtype float32 is not supported; allowed: float16, bfloat16, float8_e4m3fn, float8_e5m2"},
      {[&](Append& b) { b.kc.dtype = DType::E4M3; },
       "k_cache: dtype float8_e4m3fn differs from append_key's dtype bfloat16; they must be equal (rows are copied, "
       "not converted)"},
      {[&](Append& b) { b.v.shape[0] = 9; },
       "append_value: shape [9, 8, 128] differs from append_key's shape [10, 8, 128]"},
      {[&](Append& b) { b.k = view(fake(), DType::BF16, {10, 1024}); },
       "append_key: ndim=2 (shape [10, 1024]) is not allowed; allowed: 3, [nnz, num_kv_heads, head_dim]"},
      {[&](Append& b) { b.kc.shape[3] = 64; },
       "k_cache: shape [40, 16, 8, 64] has head_dim (shape[3])=64, but append_key has 128"},
      {[&](Append& b) { b.vc.shape[0] = 41; },
       "v_cache: shape [41, 16, 8, 128] differs from k_cache's shape [40, 16, 8, 128]"},
      {[&](Append& b) { b.vc.device = 1; }, "v_cache: device cuda:1 differs from append_key's device cuda:0"},
      {[&](Append& b) { b.k.data = fake(1); },
       "append_key: address 0x7f0000000001 is not allowed; allowed: a multiple of 2 bytes (the element size)"},
      {[&](Append& b) { b.kc.data = nullptr; }, "k_cache: data is NULL for 655360 elements"},
      {[&](Append& b) { b.table.positions = nullptr; }, "positions: is NULL for 10 entries"},
      {[&](Append& b) { b.table.kv_indptr = fake_ints(2); },
       "kv_indptr: address 0x7f0000000002 is not allowed; allowed: a multiple of 4"},
      {[&](Append& b) { b.table.batch_size = -1; }, "batch_size=-1 is not allowed; allowed: >= 0"},
      {[&](Append& b) { b.kc.shape[1] = b.vc.shape[1] = 0; },  // no slots
       "page_size=0 is not allowed; allowed: >= 1"},
  };
  for (const auto& [spoil, message] : spoiled) {
    Append b;
    spoil(b);
    CHECK_THAT(refused(b), Contains(message));
  }
  {
    Append b;  // nothing appended, nothing in the tables: valid
    b.k.shape[0] = b.v.shape[0] = 0;
    b.table = PagedKVAppendTable{};
    b.table.kv_indptr = fake_ints();
    CHECK(b.problem().nnz == 0);
  }
}

TEST_CASE("the append's access width follows every address and stride of its four views", "[page][planner]") {
  auto vec_of = [](const Append& a) { return ops::plan_page_append(a.problem(), {}).vec_bytes; };
  Append a;
  CHECK(vec_of(a) == 16);
  {
    Append b;  // a base one element off: 2-byte accesses
    b.vc.data = fake((4 << 20) + 2);
    CHECK(vec_of(b) == 2);
  }
  {
    Append b;  // K rows 3076 elements apart: 8-byte aligned
    b.k.strides = {3 * 8 * 128 + 4, 128, 1};
    CHECK(vec_of(b) == 8);
  }
  {
    Append b;  // a stride used only at index 0 does not count
    b.k.shape[0] = b.v.shape[0] = 1;
    b.k.strides[0] = 3;
    CHECK(vec_of(b) == 16);
  }
  {
    Append b;  // a strided last dimension: element by element
    b.kc.strides = {16 * 8 * 256, 8 * 256, 256, 2};
    const auto p = b.problem();
    CHECK_FALSE(p.contiguous_rows);
    const auto L = ops::plan_page_append(p, {});
    CHECK(L.vec_bytes == 2);
    CHECK(L.chunks == 128);
  }
  {
    Append b;  // head_dim 5: 10-byte rows
    for (TensorView* t : {&b.k, &b.v}) {
      t->shape[2] = 5;
      t->strides = {8 * 5, 5, 1};
    }
    for (TensorView* t : {&b.kc, &b.vc}) {
      t->shape[3] = 5;
      t->strides = {16 * 8 * 5, 8 * 5, 5, 1};
    }
    const auto L = ops::plan_page_append(b.problem(), {});
    CHECK(L.vec_bytes == 2);
    CHECK(L.chunks == 5);
    CHECK(L.lanes_log2 == 3);  // 8 threads per row, 4 idle
  }
  {
    Append b;  // fp8, 128 wide: 8 accesses of 16 bytes per row
    with_dtype(b, DType::E5M2);
    const auto L = ops::plan_page_append(b.problem(), {});
    CHECK(L.vec_bytes == 16);
    CHECK(L.chunks == 8);
    CHECK(L.kernel.spec == KernelSpec(ops::page_append_spec(DType::E4M3)));
  }
}

TEST_CASE("the page planner sizes grids to the rows and caps them at what the GPU holds", "[page][planner]") {
  ops::PageAppendProblem p;
  p.nnz = 256;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.page_size = 16;
  p.num_pages = 1000;
  p.batch_size = 256;
  p.num_indices = 256;
  p.kv_dtype = DType::BF16;
  const ops::DeviceFigures h100{132};
  auto L = ops::plan_page_append(p, h100);
  CHECK(L.items == 2048);
  CHECK(L.chunks == 16);
  CHECK(L.lanes_log2 == 4);
  CHECK(L.kernel.shape.threads == 256);
  CHECK(L.kernel.shape.grid[0] == 2048 / 16);  // 16 rows per CTA
  p.nnz = 1 << 20;
  CHECK(ops::plan_page_append(p, h100).kernel.shape.grid[0] == 132 * 8);
  p.nnz = 0;
  CHECK(ops::plan_page_append(p, h100).items == 0);
  p.head_dim = 512;  // 64 accesses per row
  p.nnz = 3;
  L = ops::plan_page_append(p, h100);
  CHECK(L.lanes_log2 == 6);
  CHECK(L.kernel.shape.grid[0] == 6);  // 24 rows, 4 per CTA
  p.nnz = int64_t(1) << 28;  // 2^31 rows
  try {
    ops::plan_page_append(p, h100);
    FAIL("accepted 2^31 rows");
  } catch (const Error& e) {
    CHECK(e.status() == Status::Unsupported);
    CHECK_THAT(std::string(e.what()), Contains("nnz * num_kv_heads = 268435456 * 8 is not supported"));
  }

  ops::BatchPositionsProblem q{4, 1000, 0};
  const auto Q = ops::plan_batch_positions(q, h100);
  CHECK(Q.items == 1000);
  CHECK(Q.kernel.shape.grid[0] == 4);
  q.nnz = -1;
  CHECK_THROWS_WITH(ops::plan_batch_positions(q, h100), Contains("nnz=-1 is not allowed; allowed: 0 to 2147483647"));
  CHECK_THROWS_WITH(
      ops::batch_positions_problem_from_args(fake_ints(), nullptr, 3, 5, fake_ints(64), fake_ints(128), 0),
      Contains("seq_lens: is NULL for 3 entries"));
}

TEST_CASE("page problems from JSON: defaults, functions, unknown keys refused by name", "[page][registry]") {
  const auto p = ops::page_problem_from_json({{"op", "page"}, {"nnz", 64}, {"batch_size", 4}, {"num_kv_heads", 8},
                                              {"head_dim", 128}, {"page_size", 16}});
  const auto& a = std::get<ops::PageAppendProblem>(p);
  CHECK(a.kv_dtype == DType::BF16);
  CHECK(a.kv_layout == KVLayout::NHD);
  CHECK(a.num_pages == 8);  // (64 / 4 + 16) / 16 pages for each of 4 requests
  CHECK(ops::page_problem_from_json(ops::to_json(a)).index() == 0);
  const auto q =
      ops::page_problem_from_json({{"op", "page"}, {"function", "get_batch_indices_positions"}, {"batch_size", 2},
                                   {"nnz", 7}});
  CHECK(std::get<ops::BatchPositionsProblem>(q).nnz == 7);
  CHECK_THROWS_WITH(ops::page_problem_from_json({{"op", "page"}, {"function", "get_seq_lens"}}),
                    Contains("problem.function='get_seq_lens' is not a page function; allowed: "
                             "append_paged_kv_cache, get_batch_indices_positions"));
  CHECK_THROWS_WITH(ops::page_problem_from_json({{"op", "page"}, {"function", "get_batch_indices_positions"},
                                                 {"batch_size", 2}, {"nnz", 7}, {"page_size", 16}}),
                    Contains("problem.page_size is not a field of page function get_batch_indices_positions"));
  CHECK_THROWS_WITH(ops::page_problem_from_json({{"op", "page"}, {"nnz", 64}, {"batch_size", 4}, {"num_kv_heads", 8},
                                                 {"head_dim", 128}, {"page_size", 16}, {"kv_dtype", "float32"}}),
                    Contains("kv_dtype=float32 is not supported"));
  CHECK_THROWS_WITH(ops::page_problem_from_json({{"op", "page"}, {"nnz", "64"}}),
                    Contains("problem.nnz=\"64\" is not allowed; expected an integer"));
}

TEST_CASE("the page operator is in the registry: kernels, explain, variants, models", "[page][registry]") {
  const auto& op = ops::find_operator("page");
  std::set<std::string> names;
  for (const auto& problem : op.variant_grid())
    for (const auto& s : op.kernels_for(problem)) names.insert(s.name());
  CHECK(names == std::set<std::string>{"page_append_kv_e1_t256", "page_append_kv_e2_t256", "page_batch_positions_t256"});
  for (const auto& problem : op.bench_problems()) {
    const auto plan = op.explain(problem, {132});
    CHECK(plan.at("kernels").size() == 1);
    CHECK(plan.at("problem").at("op") == "page");
  }
  std::set<std::string> model;
  for (const auto& problem : op.model_problems({32, 8, 128, 0.f}))
    for (const auto& s : op.kernels_for(problem)) model.insert(s.name());
  CHECK(model == names);
}

// FlashInfer's page helpers on the GPU against a host reference of their
// semantics, on random bytes (the append copies, so the comparison is exact
// and covers every byte of the cache: a row written to the wrong place, or
// a row that should have been skipped, shows). Odd page sizes (5) and 16,
// last pages partly full, a request appending nothing, nnz 1 and 0, NHD and
// HND, 16-bit and fp8, views a serving engine hands over (the halves of a
// 5-D cache, K inside a packed QKV buffer, a strided last dimension, a
// misaligned base), odd head dims, and tables pointing outside the cache.
// get_batch_indices_positions on ragged indptrs with empty requests and
// entries no request covers; both captured in a CUDA graph and replayed on
// new tables. Skips without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "attnjit/batch_decode.hpp"
#include "attnjit/page.hpp"
#include "attnjit/runtime.hpp"
#include "cuda/driver.hpp"
#include "support/captured_graph.hpp"
#include "support/device_buffer.hpp"
#include "support/error_capture.hpp"
#include "support/gpu_support.hpp"
#include "ops/page/page_planner.hpp"
#include "ops/page/page_problem.hpp"

namespace attnjit::test {
namespace {

std::vector<uint8_t> random_bytes(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// A strided view into a device buffer of random bytes, with the host copy.
struct Strided {
  std::vector<int64_t> shape, strides;  // elements
  int64_t offset = 0;                   // elements from the buffer's start
  size_t es = 2;
  std::vector<uint8_t> host;
  DeviceBuffer dev;

  size_t byte_at(const std::vector<int64_t>& idx) const {
    int64_t e = offset;
    for (size_t i = 0; i < idx.size(); ++i) e += idx[i] * strides[i];
    return size_t(e) * es;
  }
  TensorView view(DType dtype) const {
    TensorView t;
    t.data = static_cast<char*>(dev.get()) + offset * int64_t(es);
    t.dtype = dtype;
    t.ndim = static_cast<int>(shape.size());
    for (int i = 0; i < t.ndim; ++i) {
      t.shape[i] = shape[i];
      t.strides[i] = strides[i];
    }
    return t;
  }
};

Strided make_strided(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset,
                     std::mt19937& rng) {
  Strided s{std::move(shape), std::move(strides), offset, dtype_size(dtype), {}, {}};
  int64_t span = 1;
  for (size_t i = 0; i < s.shape.size(); ++i) span += std::max<int64_t>(s.shape[i] - 1, 0) * s.strides[i];
  s.host = random_bytes(size_t(offset + span) * s.es + 16, rng);
  s.dev = DeviceBuffer(s.host.size());
  s.dev.upload(s.host);
  return s;
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = int(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

// How the append's and the cache's tensors are laid out in memory.
enum class Views {
  Dense,
  FiveD,          // the cache as the halves of one [pages, 2, ...] tensor
  PackedQKV,      // append_key / append_value rows inside a [nnz, 3, H, D] buffer
  StridedLast,    // append_key's last dimension every other element: element-wise copies
  MisalignedBase  // k_cache one element past a 16-byte boundary: 2-byte (or 1-byte) accesses
};

struct Case {
  const char* name;
  DType dtype;
  KVLayout layout;
  int page_size, heads, head_dim;
  std::vector<int> before, appended;  // per request: rows already cached, rows appended
  Views views = Views::Dense;
  bool bad_rows = false;  // rows and tables outside the cache, to be skipped
  int expect_vec = 16;
};

struct Tables {
  std::vector<int32_t> batch_indices, positions, kv_indices, kv_indptr, kv_last_page_len;
  int64_t num_pages = 0;
};

// FlashInfer's tables for requests that hold before[b] + appended[b] rows,
// their pages drawn at random from a cache with some spare pages.
Tables make_tables(const Case& c, std::mt19937& rng) {
  Tables t;
  const int P = c.page_size;
  t.kv_indptr.push_back(0);
  for (size_t b = 0; b < c.before.size(); ++b) {
    const int len = c.before[b] + c.appended[b];
    const int pages = (len + P - 1) / P;
    t.kv_indptr.push_back(t.kv_indptr.back() + pages);
    t.kv_last_page_len.push_back(pages == 0 ? 0 : len - (pages - 1) * P);
    for (int r = 0; r < c.appended[b]; ++r) {
      t.batch_indices.push_back(int32_t(b));
      t.positions.push_back(c.before[b] + r);
    }
  }
  t.num_pages = t.kv_indptr.back() + 3;
  std::vector<int32_t> ids(t.num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  t.kv_indices.assign(ids.begin(), ids.begin() + t.kv_indptr.back());
  return t;
}

// Rows and table entries pointing outside the cache or the request, each of
// which the kernel must skip: a request index of -1 and of batch_size, a
// negative position, a position in the slack of a partly full last page
// (past the request's length), one past its pages; a request whose page id
// is past the cache, one whose page id is negative, and one whose pages run
// past the end of kv_indices.
void add_bad_rows(const Case& c, Tables& t) {
  const int B = static_cast<int>(c.before.size());
  const int P = c.page_size;
  auto row = [&](int b, int pos) {
    t.batch_indices.push_back(b);
    t.positions.push_back(pos);
  };
  row(-1, 0);
  row(B + 3, 0);  // batch_size, once the three requests below are added
  row(0, -3);
  for (int b = 0; b < B; ++b) {
    const int len = c.before[b] + c.appended[b];
    const int pages = t.kv_indptr[b + 1] - t.kv_indptr[b];
    if (len > 0 && len % P != 0) row(b, len);  // inside the last page, past the length
    row(b, pages * P);                         // past the request's pages
  }
  // Three more requests of one page each, appending one row each at 0.
  auto extra_request = [&](int32_t page_id, bool in_indices) {
    t.kv_indptr.push_back(t.kv_indptr.back() + 1);
    t.kv_last_page_len.push_back(1);
    if (in_indices) t.kv_indices.push_back(page_id);
    row(static_cast<int>(t.kv_last_page_len.size()) - 1, 0);
  };
  extra_request(static_cast<int32_t>(t.num_pages), true);  // past the cache
  extra_request(-2, true);                                 // negative
  extra_request(0, false);                                 // kv_indptr past kv_indices' end
}

// The reference: what FlashInfer writes for the rows the tables put inside
// the cache, and nothing for the others.
// kc / vc describe where the cache's elements are in k_bytes / v_bytes (one
// buffer for both halves of a 5-D cache).
void reference_append(const Case& c, const Tables& t, const Strided& ak, const Strided& av, const Strided& kc,
                      std::vector<uint8_t>& k_bytes, const Strided& vc, std::vector<uint8_t>& v_bytes) {
  const int64_t nnz = static_cast<int64_t>(t.batch_indices.size());
  const int64_t B = static_cast<int64_t>(t.kv_last_page_len.size());
  const int64_t P = c.page_size, num_indices = static_cast<int64_t>(t.kv_indices.size());
  const bool nhd = c.layout == KVLayout::NHD;
  for (int64_t i = 0; i < nnz; ++i) {
    const int64_t b = t.batch_indices[i], pos = t.positions[i];
    if (b < 0 || b >= B || pos < 0) continue;
    const int64_t pages = t.kv_indptr[b + 1] - t.kv_indptr[b];
    const int64_t length = (pages - 1) * P + t.kv_last_page_len[b];
    if (pos >= length || pos / P >= pages) continue;
    const int64_t at = t.kv_indptr[b] + pos / P;
    if (at < 0 || at >= num_indices) continue;
    const int64_t page = t.kv_indices[at];
    if (page < 0 || page >= t.num_pages) continue;
    const int64_t slot = pos % P;
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t d = 0; d < c.head_dim; ++d) {
        const std::vector<int64_t> dst =
            nhd ? std::vector<int64_t>{page, slot, h, d} : std::vector<int64_t>{page, h, slot, d};
        std::memcpy(&k_bytes[kc.byte_at(dst)], &ak.host[ak.byte_at({i, h, d})], kc.es);
        std::memcpy(&v_bytes[vc.byte_at(dst)], &av.host[av.byte_at({i, h, d})], vc.es);
      }
  }
}

DeviceBuffer upload_table(const std::vector<int32_t>& v) { return upload_ints(v); }

void run_case(const Runtime& rt, const Case& c, uint32_t seed) {
  INFO(c.name);
  std::mt19937 rng(seed);
  Tables t = make_tables(c, rng);
  if (c.bad_rows) add_bad_rows(c, t);
  const int64_t nnz = static_cast<int64_t>(t.batch_indices.size());
  const int64_t H = c.heads, D = c.head_dim, P = c.page_size, pages = t.num_pages;
  const bool nhd = c.layout == KVLayout::NHD;

  // The append's rows.
  Strided ak, av;
  if (c.views == Views::PackedQKV) {
    // q, k, v of a row side by side: K at 1 * H * D, V at 2 * H * D.
    ak = make_strided(c.dtype, {nnz, H, D}, {3 * H * D, D, 1}, H * D, rng);
    av = make_strided(c.dtype, {nnz, H, D}, {3 * H * D, D, 1}, 2 * H * D, rng);
  } else if (c.views == Views::StridedLast) {
    ak = make_strided(c.dtype, {nnz, H, D}, {2 * H * D, 2 * D, 2}, 0, rng);
    av = make_strided(c.dtype, {nnz, H, D}, dense_strides({nnz, H, D}), 0, rng);
  } else {
    ak = make_strided(c.dtype, {nnz, H, D}, dense_strides({nnz, H, D}), 0, rng);
    av = make_strided(c.dtype, {nnz, H, D}, dense_strides({nnz, H, D}), 0, rng);
  }

  // The cache.
  const std::vector<int64_t> shape4 = nhd ? std::vector<int64_t>{pages, P, H, D} : std::vector<int64_t>{pages, H, P, D};
  Strided kc, vc;
  TensorView tkc, tvc;
  Strided five;
  if (c.views == Views::FiveD) {
    std::vector<int64_t> shape5 = {pages, 2, shape4[1], shape4[2], D};
    five = make_strided(c.dtype, shape5, dense_strides(shape5), 0, rng);
    const int64_t sh[5] = {shape5[0], shape5[1], shape5[2], shape5[3], shape5[4]};
    const auto st5 = dense_strides(shape5);
    const int64_t st[5] = {st5[0], st5[1], st5[2], st5[3], st5[4]};
    auto [k, v] = kv_cache_halves(five.dev.get(), c.dtype, sh, st, 0);
    tkc = k;
    tvc = v;
    // The reference writes through two 4-D descriptions of the one buffer.
    kc = Strided{shape4, {st5[0], st5[2], st5[3], st5[4]}, 0, five.es, {}, {}};
    vc = Strided{shape4, {st5[0], st5[2], st5[3], st5[4]}, st5[1], five.es, {}, {}};
  } else {
    const int64_t offset = c.views == Views::MisalignedBase ? 1 : 0;
    kc = make_strided(c.dtype, shape4, dense_strides(shape4), offset, rng);
    vc = make_strided(c.dtype, shape4, dense_strides(shape4), 0, rng);
    tkc = kc.view(c.dtype);
    tvc = vc.view(c.dtype);
  }

  const DeviceBuffer d_bi = upload_table(t.batch_indices), d_pos = upload_table(t.positions),
                     d_ids = upload_table(t.kv_indices), d_indptr = upload_table(t.kv_indptr),
                     d_last = upload_table(t.kv_last_page_len);
  PagedKVAppendTable table;
  table.batch_indices = static_cast<const int32_t*>(d_bi.get());
  table.positions = static_cast<const int32_t*>(d_pos.get());
  table.kv_indices = static_cast<const int32_t*>(d_ids.get());
  table.num_indices = static_cast<int64_t>(t.kv_indices.size());
  table.kv_indptr = static_cast<const int32_t*>(d_indptr.get());
  table.kv_last_page_len = static_cast<const int32_t*>(d_last.get());
  table.batch_size = static_cast<int>(t.kv_last_page_len.size());

  const TensorView tak = ak.view(c.dtype), tav = av.view(c.dtype);
  // The access width the planner picks for these views.
  const auto problem = ops::page_append_problem_from_tensors(tak, tav, table, tkc, tvc, c.layout);
  CHECK(ops::plan_page_append(problem, {}).vec_bytes == c.expect_vec);

  append_paged_kv_cache(rt, tak, tav, table, tkc, tvc, c.layout, nullptr);
  ATTNJIT_CU(cuda::driver().CtxSynchronize());

  if (c.views == Views::FiveD) {
    reference_append(c, t, ak, av, kc, five.host, vc, five.host);
    CHECK(five.dev.download() == five.host);
  } else {
    reference_append(c, t, ak, av, kc, kc.host, vc, vc.host);
    CHECK(kc.dev.download() == kc.host);
    CHECK(vc.dev.download() == vc.host);
  }
  // The append never writes its inputs.
  CHECK(ak.dev.download() == ak.host);
  CHECK(av.dev.download() == av.host);
  // A skipped row is reported (by the next call on the device, or here), once.
  if (c.bad_rows)
    CHECK_THAT(error_of([&] { rt.check(0); }, Status::InvalidArgument),
               Catch::Matchers::Contains("is not allowed"));
  CHECK_NOTHROW(rt.check(0));
}

// get_batch_indices_positions' reference: FlashInfer's -1 fill, then each
// request's entries; positions keep what they held where no request writes.
void reference_positions(const std::vector<int32_t>& indptr, const std::vector<int32_t>& seq_lens, int64_t nnz,
                         std::vector<int32_t>& bi, std::vector<int32_t>& pos) {
  bi.assign(size_t(nnz), -1);
  for (size_t b = 0; b + 1 < indptr.size(); ++b)
    for (int64_t j = indptr[b]; j < indptr[b + 1]; ++j)
      if (j >= 0 && j < nnz) {
        bi[size_t(j)] = int32_t(b);
        pos[size_t(j)] = int32_t(j + seq_lens[b] - indptr[b + 1]);
      }
}

}  // namespace

TEST_CASE("append_paged_kv_cache writes every row FlashInfer writes, and only those", "[gpu][page]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const std::vector<Case> cases = {
      {"bf16 NHD page 16, an empty request, partly full last pages", DType::BF16, KVLayout::NHD, 16, 8, 128,
       {5, 0, 16, 31, 0}, {3, 0, 17, 1, 40}},
      {"f16 HND page 5, three heads", DType::F16, KVLayout::HND, 5, 3, 64, {0, 7, 2}, {9, 1, 13}},
      {"e4m3 NHD page 5, the halves of a 5-D cache", DType::E4M3, KVLayout::NHD, 5, 2, 128, {3, 0, 11}, {4, 6, 0},
       Views::FiveD},
      {"e5m2 HND page 16, K and V inside packed QKV rows", DType::E5M2, KVLayout::HND, 16, 4, 64, {1, 20}, {30, 2},
       Views::PackedQKV},
      {"bf16 HND page 5, the halves of a 5-D cache", DType::BF16, KVLayout::HND, 5, 2, 64, {4, 0}, {3, 12},
       Views::FiveD},
      {"bf16 NHD head_dim 5 (10-byte rows: 2-byte accesses)", DType::BF16, KVLayout::NHD, 16, 2, 5, {2, 0, 15},
       {7, 1, 18}, Views::Dense, false, 2},
      {"f16 NHD page 5, append_key's last dimension strided", DType::F16, KVLayout::NHD, 5, 3, 64, {6, 1}, {5, 11},
       Views::StridedLast, false, 2},
      {"bf16 HND k_cache one element past alignment", DType::BF16, KVLayout::HND, 16, 4, 128, {3, 17}, {14, 1},
       Views::MisalignedBase, false, 2},
      {"e4m3 HND head_dim 3 (1-byte accesses)", DType::E4M3, KVLayout::HND, 5, 3, 3, {0, 4}, {8, 9}, Views::Dense,
       false, 1},
      {"nnz 1", DType::BF16, KVLayout::NHD, 16, 8, 128, {37}, {1}},
      {"nnz 0: nothing launched, nothing written", DType::F16, KVLayout::HND, 16, 2, 64, {5, 9}, {0, 0}},
      {"fp8 with 256-wide heads, one head", DType::E5M2, KVLayout::NHD, 16, 1, 256, {16, 3}, {16, 29}},
      {"bf16 NHD page 5: rows and tables outside the cache are skipped", DType::BF16, KVLayout::NHD, 5, 2, 64,
       {3, 10, 0}, {4, 5, 7}, Views::Dense, true},
      {"e4m3 HND page 16: rows and tables outside the cache are skipped", DType::E4M3, KVLayout::HND, 16, 3, 128,
       {13, 0}, {2, 9}, Views::Dense, true},
  };
  uint32_t seed = 1;
  for (const auto& c : cases) run_case(rt, c, seed++);
}

TEST_CASE("get_batch_indices_positions matches FlashInfer's, writing nothing past nnz", "[gpu][page]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  struct PositionsCase {
    const char* name;
    std::vector<int32_t> indptr, seq_lens;
    int64_t nnz;
  };
  const std::vector<PositionsCase> cases = {
      {"FlashInfer's docstring example", {0, 1, 3, 6, 10}, {5, 5, 5, 5}, 10},
      {"empty requests among others", {0, 0, 4, 4, 4, 9, 9}, {3, 7, 0, 2, 100, 5}, 9},
      {"entries past the last request stay -1", {0, 2, 5}, {2, 8}, 8},
      {"an indptr past nnz writes nothing past nnz", {0, 3, 12}, {3, 20}, 6},
      {"entries before the first request stay -1", {2, 3, 6}, {4, 3}, 6},
      {"nnz 1", {0, 1}, {1}, 1},
      {"no requests", {0}, {}, 4},
      {"nnz 0", {0, 0}, {0}, 0},
  };
  std::mt19937 rng(5);
  for (const auto& c : cases) {
    INFO(c.name);
    const DeviceBuffer indptr = upload_ints(c.indptr), lens = upload_ints(c.seq_lens);
    // Outputs with a guard band after nnz, all filled with known garbage.
    const size_t n = size_t(c.nnz) + 8;
    std::vector<int32_t> bi0(n), pos0(n);
    for (auto& x : bi0) x = static_cast<int32_t>(rng());
    for (auto& x : pos0) x = static_cast<int32_t>(rng());
    DeviceBuffer bi = upload_ints(bi0), pos = upload_ints(pos0);
    get_batch_indices_positions(rt, static_cast<const int32_t*>(indptr.get()), static_cast<const int32_t*>(lens.get()),
                                static_cast<int>(c.seq_lens.size()), c.nnz, static_cast<int32_t*>(bi.get()),
                                static_cast<int32_t*>(pos.get()), 0, nullptr);
    ATTNJIT_CU(cuda::driver().CtxSynchronize());
    std::vector<int32_t> want_bi, want_pos = pos0;
    reference_positions(c.indptr, c.seq_lens, c.nnz, want_bi, want_pos);
    want_bi.insert(want_bi.end(), bi0.begin() + c.nnz, bi0.end());  // the guard band untouched
    auto ints = [](const DeviceBuffer& d, size_t count) {
      const auto bytes = d.download();
      std::vector<int32_t> v(count);
      std::memcpy(v.data(), bytes.data(), count * 4);
      return v;
    };
    CHECK(ints(bi, n) == want_bi);
    CHECK(ints(pos, n) == want_pos);
  }
}

TEST_CASE("the page helpers record into a CUDA graph and replay on new tables", "[gpu][page][graph]") {
  ATTNJIT_REQUIRE_GPU_CONTEXT();
  Runtime rt;
  const auto& cu = cuda::driver();
  // One step of an engine: positions from the append's indptr and the new
  // lengths, then the append; the graph's arrays are fixed buffers whose
  // contents change between replays (nnz fixed: 12 rows over 3 requests).
  constexpr int B = 3, H = 2, D = 64, P = 5, kPages = 32;
  constexpr int64_t kNnz = 12;
  std::mt19937 rng(9);
  DeviceBuffer append_indptr(4 * (B + 1)), seq_lens(4 * B), bi(4 * kNnz), pos(4 * kNnz), ids(4 * kPages),
      kv_indptr(4 * (B + 1)), last(4 * B);
  const auto k = random_bytes(size_t(kNnz) * H * D * 2, rng), v = random_bytes(size_t(kNnz) * H * D * 2, rng);
  DeviceBuffer dk(k.size()), dv(v.size());
  dk.upload(k);
  dv.upload(v);
  const size_t cache_bytes = size_t(kPages) * P * H * D * 2;
  DeviceBuffer kc(cache_bytes), vc(cache_bytes);
  const TensorView tk = make_tensor(dk.get(), DType::BF16, {kNnz, H, D});
  const TensorView tv = make_tensor(dv.get(), DType::BF16, {kNnz, H, D});
  const TensorView tkc = make_tensor(kc.get(), DType::BF16, {kPages, P, H, D});
  const TensorView tvc = make_tensor(vc.get(), DType::BF16, {kPages, P, H, D});
  PagedKVAppendTable table;
  table.batch_indices = static_cast<const int32_t*>(bi.get());
  table.positions = static_cast<const int32_t*>(pos.get());
  table.kv_indices = static_cast<const int32_t*>(ids.get());
  table.num_indices = kPages;
  table.kv_indptr = static_cast<const int32_t*>(kv_indptr.get());
  table.kv_last_page_len = static_cast<const int32_t*>(last.get());
  table.batch_size = B;

  CUstream stream;
  ATTNJIT_CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  auto step = [&] {
    get_batch_indices_positions(rt, static_cast<const int32_t*>(append_indptr.get()),
                                static_cast<const int32_t*>(seq_lens.get()), B, kNnz, static_cast<int32_t*>(bi.get()),
                                static_cast<int32_t*>(pos.get()), 0, stream);
    append_paged_kv_cache(rt, tk, tv, table, tkc, tvc, KVLayout::NHD, stream);
  };
  // Tables for appended rows `rows` after `before` cached ones, pages at random.
  auto write_tables = [&](const std::vector<int>& before, const std::vector<int>& rows, Tables& t) {
    Case c{"graph", DType::BF16, KVLayout::NHD, P, H, D, before, rows};
    t = make_tables(c, rng);
    t.num_pages = kPages;  // the cache's; every drawn id is below it
    std::vector<int32_t> a_indptr{0}, lens;
    for (int b = 0; b < B; ++b) {
      a_indptr.push_back(a_indptr.back() + rows[b]);
      lens.push_back(before[b] + rows[b]);
    }
    std::vector<int32_t> padded_ids = t.kv_indices;
    padded_ids.resize(kPages, 0);
    append_indptr.upload([&] { std::vector<uint8_t> b(16); std::memcpy(b.data(), a_indptr.data(), 16); return b; }());
    seq_lens.upload([&] { std::vector<uint8_t> b(12); std::memcpy(b.data(), lens.data(), 12); return b; }());
    auto put = [](DeviceBuffer& d, const std::vector<int32_t>& v) {
      std::vector<uint8_t> b(d.bytes(), 0);
      std::memcpy(b.data(), v.data(), std::min(b.size(), v.size() * 4));
      d.upload(b);
    };
    put(ids, padded_ids);
    put(kv_indptr, t.kv_indptr);
    put(last, t.kv_last_page_len);
  };
  Tables t;
  write_tables({0, 0, 0}, {4, 4, 4}, t);
  step();  // loads both kernels before the capture
  ATTNJIT_CU(cu.StreamSynchronize(stream));
  const CapturedGraph graph(stream, [&] { step(); });
  const std::vector<std::pair<std::vector<int>, std::vector<int>>> steps = {
      {{0, 0, 0}, {4, 4, 4}}, {{4, 4, 4}, {1, 10, 1}}, {{3, 9, 0}, {0, 7, 5}}, {{20, 1, 2}, {12, 0, 0}}};
  for (size_t s = 0; s < steps.size(); ++s) {
    INFO("replay " << s);
    write_tables(steps[s].first, steps[s].second, t);
    auto kh = random_bytes(cache_bytes, rng), vh = random_bytes(cache_bytes, rng);
    kc.upload(kh);
    vc.upload(vh);
    graph.launch(stream);
    ATTNJIT_CU(cu.StreamSynchronize(stream));
    Case c{"graph", DType::BF16, KVLayout::NHD, P, H, D, steps[s].first, steps[s].second};
    Strided sk{{kNnz, H, D}, dense_strides({kNnz, H, D}), 0, 2, k, {}};
    Strided sv{{kNnz, H, D}, dense_strides({kNnz, H, D}), 0, 2, v, {}};
    const Strided cache{{kPages, P, H, D}, dense_strides({kPages, P, H, D}), 0, 2, {}, {}};
    reference_append(c, t, sk, sv, cache, kh, cache, vh);
    CHECK(kc.download() == kh);
    CHECK(vc.download() == vh);
  }
  cu.StreamDestroy(stream);
}

}  // namespace attnjit::test

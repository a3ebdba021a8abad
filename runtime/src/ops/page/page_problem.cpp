#include "ops/page/page_problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <set>
#include <string>

#include "attnjit/error.hpp"
#include "invalid_argument.hpp"
#include "ops/tensor_checks.hpp"
#include "spec/json_fields.hpp"

namespace attnjit::ops {

namespace {

constexpr const char* kAppend = "append_paged_kv_cache";
constexpr const char* kPositions = "get_batch_indices_positions";

// ---- from tensors -----------------------------------------------------------

bool copyable_dtype(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::E4M3 || t == DType::E5M2;
}

void check_same(const TensorView& t, const char* name, const TensorView& ref, const char* ref_name) {
  if (t.dtype != ref.dtype)
    invalid(fmt::format("{}: dtype {} differs from {}'s dtype {}; they must be equal (rows are copied, not "
                        "converted)",
                        name, to_string(t.dtype), ref_name, to_string(ref.dtype)));
  if (t.device != ref.device)
    invalid(fmt::format("{}: device cuda:{} differs from {}'s device cuda:{}; all tensors must be on one device", name,
                        t.device, ref_name, ref.device));
}

// Data present for a non-empty tensor, and aligned to its element.
void check_data(const TensorView& t, const char* name) {
  if (t.numel() > 0 && t.data == nullptr) invalid(fmt::format("{}: data is NULL for {} elements", name, t.numel()));
  const auto es = dtype_size(t.dtype);
  if (reinterpret_cast<uintptr_t>(t.data) % es != 0)
    invalid(fmt::format("{}: address {} is not allowed; allowed: a multiple of {} bytes (the element size)", name,
                        t.data, es));
}

// The lowest power of two (up to 16) dividing the address, a row's bytes
// and every stride that is ever multiplied by a nonzero index.
int widest_access(const TensorView& t, int64_t row_bytes) {
  const int64_t es = static_cast<int64_t>(dtype_size(t.dtype));
  uint64_t bits = reinterpret_cast<uintptr_t>(t.data) | uint64_t(row_bytes) | 16u;
  for (int i = 0; i + 1 < t.ndim; ++i)
    if (t.shape[i] > 1) bits |= uint64_t(t.strides[i] * es);
  return static_cast<int>(bits & (~bits + 1));
}

void check_cache(const TensorView& c, const char* name, KVLayout layout, int64_t heads, int64_t head_dim) {
  const bool nhd = layout == KVLayout::NHD;
  const char* shape = nhd ? "[pages, page_size, num_kv_heads, head_dim] for kv_layout NHD"
                          : "[pages, num_kv_heads, page_size, head_dim] for kv_layout HND";
  if (c.ndim != 4)
    invalid(fmt::format("{}: ndim={} (shape {}) is not allowed; allowed: 4, {}", name, c.ndim, shape_of(c), shape));
  const int hdim = nhd ? 2 : 1;
  if (c.shape[hdim] != heads)
    invalid(fmt::format("{}: shape {} has num_kv_heads (shape[{}])={}, but append_key has {}; they must be equal "
                        "({})",
                        name, shape_of(c), hdim, c.shape[hdim], heads, shape));
  if (c.shape[3] != head_dim)
    invalid(fmt::format("{}: shape {} has head_dim (shape[3])={}, but append_key has {}; they must be equal", name,
                        shape_of(c), c.shape[3], head_dim));
}

void check_array(const void* p, int64_t length, const char* name) {
  if (length > 0 && p == nullptr) invalid(fmt::format("{}: is NULL for {} entries; allowed: a device array", name, length));
  if (reinterpret_cast<uintptr_t>(p) % sizeof(int32_t) != 0)
    invalid(fmt::format("{}: address {} is not allowed; allowed: a multiple of 4 bytes (int32)", name, p));
}

int narrow(int64_t v, const char* what) {
  if (v > INT_MAX) invalid(fmt::format("{}={} is too large; allowed: at most {}", what, v, INT_MAX));
  return static_cast<int>(v);
}

// ---- JSON ---------------------------------------------------------------------

void only_keys(const nlohmann::json& j, const std::set<std::string>& keys, const char* function) {
  for (const auto& item : j.items())
    if (!keys.count(item.key()))
      invalid(fmt::format("problem.{} is not a field of page function {}; allowed: {}", item.key(), function,
                          fmt::join(keys, ", ")));
}

}  // namespace

PageAppendProblem page_append_problem_from_tensors(const TensorView& append_key, const TensorView& append_value,
                                                   const PagedKVAppendTable& table, const TensorView& k_cache,
                                                   const TensorView& v_cache, KVLayout kv_layout) {
  const TensorView& ak = append_key;
  if (ak.ndim != 3)
    invalid(fmt::format("append_key: ndim={} (shape {}) is not allowed; allowed: 3, [nnz, num_kv_heads, head_dim]",
                        ak.ndim, shape_of(ak)));
  if (!copyable_dtype(ak.dtype))
    invalid(fmt::format("append_key: dtype {} is not supported; allowed: float16, bfloat16, float8_e4m3fn, "
                        "float8_e5m2",
                        to_string(ak.dtype)));
  if (append_value.ndim != 3 || append_value.shape != ak.shape)
    invalid(fmt::format("append_value: shape {} differs from append_key's shape {}; they must be equal",
                        shape_of(append_value), shape_of(ak)));
  check_same(append_value, "append_value", ak, "append_key");
  check_cache(k_cache, "k_cache", kv_layout, ak.shape[1], ak.shape[2]);
  check_same(k_cache, "k_cache", ak, "append_key");
  if (v_cache.ndim != 4 || v_cache.shape != k_cache.shape)
    invalid(fmt::format("v_cache: shape {} differs from k_cache's shape {}; they must be equal", shape_of(v_cache),
                        shape_of(k_cache)));
  check_same(v_cache, "v_cache", ak, "append_key");
  for (auto [t, name] : {std::pair{&ak, "append_key"}, {&append_value, "append_value"}, {&k_cache, "k_cache"},
                         {&v_cache, "v_cache"}})
    check_data(*t, name);

  PageAppendProblem p;
  p.nnz = ak.shape[0];
  p.num_kv_heads = narrow(ak.shape[1], "append_key: num_kv_heads (shape[1])");
  p.head_dim = narrow(ak.shape[2], "append_key: head_dim (shape[2])");
  p.page_size = narrow(k_cache.shape[kv_layout == KVLayout::NHD ? 1 : 2], "k_cache: page_size");
  p.num_pages = k_cache.shape[0];
  p.batch_size = table.batch_size;
  p.num_indices = table.num_indices;
  p.kv_dtype = ak.dtype;
  p.kv_layout = kv_layout;
  p.device = ak.device;
  const int64_t row_bytes = int64_t(p.head_dim) * int64_t(dtype_size(p.kv_dtype));
  p.access_bytes = 16;
  for (const TensorView* t : {&ak, &append_value, &k_cache, &v_cache}) {
    p.access_bytes = std::min(p.access_bytes, widest_access(*t, row_bytes));
    if (p.head_dim > 1 && t->strides[t->ndim - 1] != 1) p.contiguous_rows = false;
  }

  if (table.batch_size < 0)
    invalid(fmt::format("batch_size={} is not allowed; allowed: >= 0 (kv_last_page_len's length)", table.batch_size));
  if (table.num_indices < 0)
    invalid(fmt::format("num_indices={} is not allowed; allowed: >= 0 (kv_indices' length)", table.num_indices));
  check_array(table.batch_indices, p.nnz, "batch_indices");
  check_array(table.positions, p.nnz, "positions");
  check_array(table.kv_indices, table.num_indices, "kv_indices");
  check_array(table.kv_indptr, int64_t(table.batch_size) + 1, "kv_indptr");
  check_array(table.kv_last_page_len, table.batch_size, "kv_last_page_len");
  validate(p);
  return p;
}

BatchPositionsProblem batch_positions_problem_from_args(const int32_t* append_indptr, const int32_t* seq_lens,
                                                        int batch_size, int64_t nnz, const int32_t* batch_indices,
                                                        const int32_t* positions, int device) {
  BatchPositionsProblem p{batch_size, nnz, device};
  validate(p);
  check_array(append_indptr, int64_t(batch_size) + 1, "append_indptr");
  check_array(seq_lens, batch_size, "seq_lens");
  check_array(batch_indices, nnz, "batch_indices");
  check_array(positions, nnz, "positions");
  return p;
}

PageProblem page_problem_from_json(const nlohmann::json& j) {
  if (!j.is_object()) invalid(fmt::format("a page problem must be a JSON object, got {}", j.dump()));
  const std::string function = problem_json::string_field(j, "function", kAppend);
  if (function == kPositions) {
    only_keys(j, {"op", "function", "batch_size", "nnz", "device"}, kPositions);
    BatchPositionsProblem p;
    p.batch_size = problem_json::int_field(j, "batch_size");
    p.nnz = problem_json::int64_field(j, "nnz");
    p.device = problem_json::int_field(j, "device", 0);
    validate(p);
    return p;
  }
  if (function != kAppend)
    invalid(fmt::format("problem.function='{}' is not a page function; allowed: {}, {}", function, kAppend, kPositions));
  only_keys(j,
            {"op", "function", "nnz", "num_kv_heads", "head_dim", "page_size", "num_pages", "batch_size",
             "num_indices", "kv_dtype", "kv_layout", "device"},
            kAppend);
  PageAppendProblem p;
  p.nnz = problem_json::int64_field(j, "nnz");
  p.num_kv_heads = problem_json::int_field(j, "num_kv_heads");
  p.head_dim = problem_json::int_field(j, "head_dim");
  p.page_size = problem_json::int_field(j, "page_size");
  p.batch_size = problem_json::int_field(j, "batch_size");
  // Unless given: every request's rows on pages of its own.
  const int64_t pages = p.page_size > 0 && p.batch_size > 0
                            ? (p.nnz / p.batch_size + p.page_size) / p.page_size * p.batch_size
                            : 0;
  p.num_pages = problem_json::int64_field(j, "num_pages", pages);
  p.num_indices = problem_json::int64_field(j, "num_indices", p.num_pages);
  p.kv_dtype = parse_dtype(problem_json::string_field(j, "kv_dtype", "bfloat16"), "problem.kv_dtype");
  p.kv_layout = parse_kv_layout(problem_json::string_field(j, "kv_layout", "NHD"), "problem.kv_layout");
  p.device = problem_json::int_field(j, "device", 0);
  validate(p);
  return p;
}

nlohmann::json to_json(const PageAppendProblem& p) {
  nlohmann::json j = {{"op", "page"},
                      {"function", kAppend},
                      {"nnz", p.nnz},
                      {"num_kv_heads", p.num_kv_heads},
                      {"head_dim", p.head_dim},
                      {"page_size", p.page_size},
                      {"num_pages", p.num_pages},
                      {"batch_size", p.batch_size},
                      {"num_indices", p.num_indices},
                      {"kv_dtype", to_string(p.kv_dtype)},
                      {"kv_layout", to_string(p.kv_layout)}};
  if (p.device != 0) j["device"] = p.device;
  return j;
}

nlohmann::json to_json(const BatchPositionsProblem& p) {
  nlohmann::json j = {{"op", "page"}, {"function", kPositions}, {"batch_size", p.batch_size}, {"nnz", p.nnz}};
  if (p.device != 0) j["device"] = p.device;
  return j;
}

void validate(const PageAppendProblem& p) {
  if (p.nnz < 0 || p.nnz > INT_MAX)
    invalid(fmt::format("nnz={} is not allowed; allowed: 0 to {} (batch_indices and positions are int32)", p.nnz,
                        INT_MAX));
  if (p.num_kv_heads < 1) invalid(fmt::format("num_kv_heads={} is not allowed; allowed: >= 1", p.num_kv_heads));
  if (p.head_dim < 1) invalid(fmt::format("head_dim={} is not allowed; allowed: >= 1", p.head_dim));
  if (p.page_size < 1) invalid(fmt::format("page_size={} is not allowed; allowed: >= 1", p.page_size));
  if (p.num_pages < 0) invalid(fmt::format("num_pages={} is not allowed; allowed: >= 0", p.num_pages));
  if (p.batch_size < 0 || p.batch_size == INT_MAX)
    invalid(fmt::format("batch_size={} is not allowed; allowed: 0 to {}", p.batch_size, INT_MAX - 1));
  if (p.num_indices < 0) invalid(fmt::format("num_indices={} is not allowed; allowed: >= 0", p.num_indices));
  if (!copyable_dtype(p.kv_dtype))
    invalid(fmt::format("kv_dtype={} is not supported; allowed: float16, bfloat16, float8_e4m3fn, float8_e5m2",
                        to_string(p.kv_dtype)));
  // Rows (token, head) are numbered in 31 bits on the device.
  if (p.nnz * p.num_kv_heads > INT_MAX)
    throw Error(Status::Unsupported, fmt::format("nnz * num_kv_heads = {} * {} is not supported; allowed: at most {} "
                                                 "rows per call (split the append)",
                                                 p.nnz, p.num_kv_heads, INT_MAX));
  const int es = static_cast<int>(dtype_size(p.kv_dtype));
  if (p.access_bytes < es || p.access_bytes > 16 || (p.access_bytes & (p.access_bytes - 1)) != 0)
    invalid(fmt::format("access_bytes={} is not allowed; allowed: a power of two from {} to 16", p.access_bytes, es));
  if (p.device < 0) invalid(fmt::format("device={} is not allowed; allowed: >= 0", p.device));
}

void validate(const BatchPositionsProblem& p) {
  if (p.batch_size < 0 || p.batch_size == INT_MAX)
    invalid(fmt::format("batch_size={} is not allowed; allowed: 0 to {} (append_indptr has batch_size + 1 int32 "
                        "entries)",
                        p.batch_size, INT_MAX - 1));
  if (p.nnz < 0 || p.nnz > INT_MAX)
    invalid(fmt::format("nnz={} is not allowed; allowed: 0 to {} (int32 outputs)", p.nnz, INT_MAX));
  if (p.device < 0) invalid(fmt::format("device={} is not allowed; allowed: >= 0", p.device));
}

}  // namespace attnjit::ops

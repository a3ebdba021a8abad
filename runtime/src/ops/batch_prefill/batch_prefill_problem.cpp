#include "ops/batch_prefill/batch_prefill_problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <set>
#include <string>

#include "attnjit/error.hpp"
#include "ops/attention_options/prefill_options.hpp"
#include "invalid_argument.hpp"

namespace attnjit::ops {

namespace {

// A request's tokens, and the sums the int32 index arrays hold.
constexpr int64_t kMaxLen = INT32_MAX / 2;

KVSource parse_source(const std::string& s) {
  if (s == "ragged") return KVSource::Ragged;
  if (s == "paged") return KVSource::Paged;
  invalid(
      fmt::format("problem.kv_source='{}' is not allowed; allowed: 'ragged' (BatchPrefillWithRaggedKVCacheWrapper), "
                  "'paged' (BatchPrefillWithPagedKVCacheWrapper)",
                  s));
}

std::vector<int32_t> lens_of(const nlohmann::json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_array() || v.empty())
    invalid(fmt::format("problem.{}={} is not allowed; expected a non-empty list of token counts, one per request", key,
                        v.dump()));
  std::vector<int32_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& e = v[i];
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > kMaxLen)
      invalid(fmt::format("problem.{}[{}]={} is not allowed; each length must be an integer in [0, {}]", key, i,
                          e.dump(), kMaxLen));
    out.push_back(e.get<int32_t>());
  }
  return out;
}

int32_t len_of(const nlohmann::json& j, const char* key) {
  const int64_t n = problem_json::int64_field(j, key);
  if (n < 0 || n > kMaxLen)
    invalid(fmt::format("problem.{}={} is not allowed; it must be in [0, {}]", key, n, kMaxLen));
  return static_cast<int32_t>(n);
}

// The lengths in either form (header); none when no length key is present.
void read_lengths(const nlohmann::json& j, BatchPrefillProblem& p) {
  const bool lists = j.contains("qo_lens") || j.contains("kv_lens");
  const bool uniform = j.contains("qo_len") || j.contains("kv_len");
  if (lists && uniform)
    invalid(
        "problem: qo_len/kv_len and qo_lens/kv_lens are not allowed together; give lists, or one length for "
        "every request with batch_size");
  const int batch = problem_json::int_field(j, "batch_size", 0);
  if (j.contains("batch_size") && batch < 1)
    invalid(fmt::format("problem.batch_size={} is not allowed; it must be >= 1", batch));
  if (!lists && !uniform) {
    if (j.contains("batch_size"))
      invalid(fmt::format("problem.batch_size={} is not allowed without lengths; give qo_len and/or kv_len with it",
                          batch));
    return;
  }
  if (lists) {
    p.qo_lens = lens_of(j, j.contains("qo_lens") ? "qo_lens" : "kv_lens");
    p.kv_lens = lens_of(j, j.contains("kv_lens") ? "kv_lens" : "qo_lens");
    if (p.qo_lens.size() != p.kv_lens.size())
      invalid(fmt::format("problem.kv_lens: {} requests is not allowed; qo_lens has {}; they must be equal",
                          p.kv_lens.size(), p.qo_lens.size()));
    if (batch > 0 && size_t(batch) != p.qo_lens.size())
      invalid(fmt::format("problem.batch_size={} is not allowed; the length lists hold {} requests", batch,
                          p.qo_lens.size()));
    return;
  }
  const int32_t qo = len_of(j, j.contains("qo_len") ? "qo_len" : "kv_len");
  const int32_t kv = len_of(j, j.contains("kv_len") ? "kv_len" : "qo_len");
  p.qo_lens.assign(size_t(batch > 0 ? batch : 1), qo);
  p.kv_lens.assign(p.qo_lens.size(), kv);
}

}  // namespace

BatchPrefillProblem batch_prefill_problem_from_json(const nlohmann::json& j) {
  std::set<std::string> keys = prefill_option_keys();
  keys.insert({"op", "kv_source", "page_size", "num_qo_heads", "num_kv_heads", "head_dim", "q_dtype", "kv_dtype",
               "use_cuda_graph", "max_batch_size", "device", "batch_size", "qo_len", "kv_len", "qo_lens", "kv_lens"});
  problem_json::require_keys(j, keys, "batch_prefill");
  BatchPrefillProblem p;
  p.source = parse_source(problem_json::string_field(j, "kv_source", "ragged"));
  p.page_size = problem_json::int_field(j, "page_size", p.source == KVSource::Paged ? 16 : p.page_size);
  problem_json::read_heads(j, p);
  problem_json::read_dtypes(j, p);
  p.options = prefill_options_from_json(j);
  p.use_cuda_graph = problem_json::bool_field(j, "use_cuda_graph", false);
  p.max_batch_size = problem_json::int_field(j, "max_batch_size", p.max_batch_size);
  p.device = problem_json::int_field(j, "device", 0);
  read_lengths(j, p);
  validate(p);
  return p;
}

nlohmann::json to_json(const BatchPrefillProblem& p) {
  nlohmann::json j = {{"op", "batch_prefill"},
                      {"kv_source", to_string(p.source)},
                      {"num_qo_heads", p.num_qo_heads},
                      {"num_kv_heads", p.num_kv_heads},
                      {"head_dim", p.head_dim},
                      {"q_dtype", to_string(p.q_dtype)},
                      {"kv_dtype", to_string(p.kv_dtype)},
                      {"use_cuda_graph", p.use_cuda_graph}};
  if (p.source == KVSource::Paged) j["page_size"] = p.page_size;
  if (p.use_cuda_graph) j["max_batch_size"] = p.max_batch_size;
  if (p.device != 0) j["device"] = p.device;
  put_prefill_options(j, p.options);
  if (p.has_lengths()) {
    j["qo_lens"] = p.qo_lens;
    j["kv_lens"] = p.kv_lens;
  }
  return j;
}

void validate(const BatchPrefillProblem& p) {
  validate_prefill_heads(p.num_qo_heads, p.num_kv_heads, p.head_dim, p.q_dtype, p.kv_dtype);
  validate_prefill_options(p.options);
  validate_prefill_backend(p.options, p.head_dim);
  if (p.source == KVSource::Contiguous)
    invalid(
        "kv_source='contiguous' is not allowed here; allowed: 'ragged', 'paged' (one request's contiguous K/V "
        "is the single_prefill operator)");
  if (p.source == KVSource::Paged && p.page_size < 1)
    invalid(fmt::format("page_size={} is not allowed; it must be >= 1", p.page_size));
  if (p.source == KVSource::Ragged && p.page_size != 0)
    invalid(
        fmt::format("page_size={} is not allowed with kv_source='ragged' (K/V rows are not paged); give it with "
                    "kv_source='paged'",
                    p.page_size));
  validate_prefill_dtypes(p.options, p.head_dim, p.q_dtype, p.source);
  // plan() would refuse it on every device: refused here, before prewarm lists kernels for it.
  if ((p.options.backend == "fa3" || p.options.backend == "fa3_ws") && dtype_size(p.kv_dtype) != 2 &&
      p.q_dtype != DType::E4M3)
    throw Error(Status::Unsupported,
                fmt::format("backend='{}' takes 16-bit K/V; kv_dtype={} is not supported there; allowed: 'auto', "
                            "'fa2'",
                            p.options.backend, to_string(p.kv_dtype)));
  if (p.use_cuda_graph && p.max_batch_size < 1)
    invalid(
        fmt::format("max_batch_size={} is not allowed with use_cuda_graph=true; it must be >= 1 (the fixed "
                    "buffers hold max_batch_size + 1 indptr entries)",
                    p.max_batch_size));
  if (!p.use_cuda_graph && p.max_batch_size != 0)
    invalid(
        fmt::format("max_batch_size={} is not allowed with use_cuda_graph=false; it sizes CUDA-graph mode's "
                    "fixed buffers (give use_cuda_graph=true, or leave it out)",
                    p.max_batch_size));
  if (p.device < 0) invalid(fmt::format("device={} is not allowed; it must be >= 0", p.device));
  if (p.qo_lens.empty() && p.kv_lens.empty()) return;  // no lengths: the kernel set alone
  if (p.qo_lens.size() != p.kv_lens.size() || p.kv_lens.empty())
    invalid(fmt::format("qo_lens: {} requests and kv_lens: {} are not allowed; both must list the same requests (>= 1)",
                        p.qo_lens.size(), p.kv_lens.size()));
  if (p.use_cuda_graph && p.kv_lens.size() > size_t(p.max_batch_size))
    invalid(fmt::format("batch_size={} is not allowed with use_cuda_graph=true; allowed: 1 to max_batch_size={}",
                        p.kv_lens.size(), p.max_batch_size));
  int64_t qo_sum = 0, kv_sum = 0;
  for (size_t b = 0; b < p.kv_lens.size(); ++b) {
    for (auto [n, name] : {std::pair{p.qo_lens[b], "qo_lens"}, std::pair{p.kv_lens[b], "kv_lens"}})
      if (n < 0 || n > kMaxLen)
        invalid(fmt::format("{}[{}]={} is not allowed; each length must be in [0, {}]", name, b, n, kMaxLen));
    qo_sum += p.qo_lens[b];
    // Ragged: kv_indptr counts rows; paged: pages.
    kv_sum += p.source == KVSource::Paged ? (int64_t(p.kv_lens[b]) + p.page_size - 1) / p.page_size : p.kv_lens[b];
  }
  if (qo_sum * p.num_qo_heads > kMaxLen)
    invalid(fmt::format("sum(qo_lens) * num_qo_heads={} is not allowed; it must be <= {}", qo_sum * p.num_qo_heads,
                        kMaxLen));
  if (kv_sum > INT32_MAX)
    invalid(fmt::format("sum(kv_lens){}={} is not allowed; kv_indptr is int32 (<= {})",
                        p.source == KVSource::Paged ? " in pages" : "", kv_sum, INT32_MAX));
}

BatchPrefillShape planner_shape(const BatchPrefillProblem& p) {
  if (!p.has_lengths())
    invalid("problem: no lengths; a plan needs qo_lens and kv_lens (or qo_len, kv_len and batch_size)");
  BatchPrefillShape s;
  s.qo_indptr = {0};
  for (int32_t n : p.qo_lens) s.qo_indptr.push_back(s.qo_indptr.back() + n);
  s.kv_lens = p.kv_lens;
  s.num_qo_heads = p.num_qo_heads;
  s.num_kv_heads = p.num_kv_heads;
  s.head_dim = p.head_dim;
  s.q_dtype = p.q_dtype;
  s.kv_dtype = p.kv_dtype;
  s.options = p.options;
  s.source = p.source;
  for (size_t b = 0; b < p.kv_lens.size(); ++b) {
    if (p.source == KVSource::Paged)
      s.num_page_indices += size_t((int64_t(p.kv_lens[b]) + p.page_size - 1) / p.page_size);
    if (p.options.custom_mask) s.mask_bytes += (size_t(p.qo_lens[b]) * size_t(p.kv_lens[b]) + 7) / 8;
  }
  s.graph_max_batch = p.use_cuda_graph ? p.max_batch_size : 0;
  return s;
}

}  // namespace attnjit::ops

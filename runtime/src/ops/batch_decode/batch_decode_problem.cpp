#include "ops/batch_decode/batch_decode_problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <set>

#include "attnjit/error.hpp"
#include "ops/attention_options/decode_options.hpp"
#include "invalid_argument.hpp"

namespace attnjit::ops {

namespace {

const char* page_table_name(PageTable t) { return t == PageTable::BlockTable ? "block_table" : "indptr"; }

}  // namespace

BatchDecodeProblem batch_decode_problem_from_json(const nlohmann::json& j) {
  static const std::set<std::string> keys = decode_problem_keys(
      {"op", "batch_size", "num_qo_heads", "num_kv_heads", "head_dim", "page_size", "page_table", "host_lengths",
       "max_seq_len", "q_dtype", "kv_dtype", "o_dtype", "use_cuda_graph", "device", "kv_len", "kv_lens",
       "q_len_per_req", "max_q_len", "draft_mask"});
  problem_json::require_keys(j, keys, "batch_decode");
  BatchDecodeProblem p;
  p.batch_size = problem_json::int_field(j, "batch_size", 1);
  problem_json::read_heads(j, p);
  p.page_size = problem_json::int_field(j, "page_size", 16);
  const std::string table = problem_json::string_field(j, "page_table", "indptr");
  if (table == "indptr") p.page_table = PageTable::IndptrIndices;
  else if (table == "block_table") p.page_table = PageTable::BlockTable;
  else invalid(fmt::format("problem.page_table='{}' is not allowed; allowed: indptr, block_table", table));
  p.host_lengths = problem_json::bool_field(j, "host_lengths", true);
  p.max_seq_len = problem_json::int64_field(j, "max_seq_len", 0);
  p.q_len_per_req = problem_json::int_field(j, "q_len_per_req", 1);
  p.max_q_len = problem_json::int_field(j, "max_q_len", 0);
  p.draft_mask = problem_json::bool_field(j, "draft_mask", false);
  p.device = problem_json::int_field(j, "device", 0);
  problem_json::read_dtypes(j, p);
  p.o_dtype = parse_dtype(problem_json::string_field(j, "o_dtype", to_string(p.q_dtype)), "problem.o_dtype");
  read_decode_options(j, p.options);
  p.options.use_cuda_graph = problem_json::bool_field(j, "use_cuda_graph", false);
  validate(p);
  return p;
}

std::vector<int32_t> kv_lens_from_json(const nlohmann::json& j, const BatchDecodeProblem& p) {
  if (j.contains("kv_lens")) {
    const auto& v = j.at("kv_lens");
    if (!v.is_array() || v.size() != size_t(p.batch_size))
      invalid(fmt::format("problem.kv_lens={} is not allowed; expected a list of batch_size={} lengths", v.dump(),
                          p.batch_size));
    std::vector<int32_t> lens;
    for (const auto& e : v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT_MAX / 2)
        invalid(fmt::format("problem.kv_lens holds {}; each length must be an integer in [0, {}]", e.dump(),
                            INT_MAX / 2));
      lens.push_back(e.get<int32_t>());
    }
    return lens;
  }
  const int64_t fallback = p.max_seq_len > 0 ? p.max_seq_len : 1;
  const int64_t len = problem_json::int64_field(j, "kv_len", fallback);
  if (len < 1 || len > INT_MAX / 2)
    invalid(fmt::format("problem.kv_len={} is not allowed; it must be in [1, {}]", len, INT_MAX / 2));
  return std::vector<int32_t>(size_t(p.batch_size), static_cast<int32_t>(len));
}

nlohmann::json to_json(const BatchDecodeProblem& p) {
  nlohmann::json j = {{"op", "batch_decode"},
                      {"batch_size", p.batch_size},
                      {"num_qo_heads", p.num_qo_heads},
                      {"num_kv_heads", p.num_kv_heads},
                      {"head_dim", p.head_dim},
                      {"page_size", p.page_size},
                      {"page_table", page_table_name(p.page_table)},
                      {"host_lengths", p.host_lengths},
                      {"max_seq_len", p.max_seq_len},
                      {"q_dtype", to_string(p.q_dtype)},
                      {"kv_dtype", to_string(p.kv_dtype)},
                      {"o_dtype", to_string(p.o_dtype)},
                      {"use_cuda_graph", p.options.use_cuda_graph}};
  if (p.device != 0) j["device"] = p.device;
  // Only when speculative: one-token problems keep the JSON (and memo keys) they had.
  if (p.q_len_per_req != 1) j["q_len_per_req"] = p.q_len_per_req;
  if (p.max_q_len != 0) j["max_q_len"] = p.max_q_len;
  if (p.draft_mask) j["draft_mask"] = true;
  put_decode_options(j, p.options);
  return j;
}

void validate(const BatchDecodeProblem& p) {
  // The grid's y dimension holds the work items: at most batch + one wave.
  constexpr int kMaxBatch = 32768;
  if (p.batch_size < 1 || p.batch_size > kMaxBatch)
    invalid(fmt::format("batch_size={} is not allowed; allowed: 1 to {}", p.batch_size, kMaxBatch));
  validate_heads(p.num_qo_heads, p.num_kv_heads, p.head_dim);
  if (p.page_size < 1 || p.page_size > 65536)
    invalid(fmt::format("page_size={} is not allowed; allowed: 1 to 65536", p.page_size));
  if (!p.host_lengths && (p.max_seq_len < 1 || p.max_seq_len > INT_MAX / 2))
    invalid(fmt::format("max_seq_len={} is not allowed when the lengths are only on the device; allowed: 1 to {}",
                        p.max_seq_len, INT_MAX / 2));
  if (p.q_dtype != DType::F16 && p.q_dtype != DType::BF16)
    invalid(fmt::format("q.dtype={} is not supported; allowed: float16, bfloat16", to_string(p.q_dtype)));
  if (p.o_dtype != p.q_dtype)
    invalid(fmt::format("out.dtype={} is not supported with q.dtype={}; allowed: q's dtype", to_string(p.o_dtype),
                        to_string(p.q_dtype)));
  const bool kv16 = p.kv_dtype == DType::F16 || p.kv_dtype == DType::BF16;
  const bool kv8 = p.kv_dtype == DType::E4M3 || p.kv_dtype == DType::E5M2;
  if (!kv16 && !kv8)
    invalid(fmt::format("kv_cache.dtype={} is not supported; allowed: float16, bfloat16, float8_e4m3fn, float8_e5m2",
                        to_string(p.kv_dtype)));
  if (kv16 && p.kv_dtype != p.q_dtype)
    invalid(fmt::format("kv_cache.dtype={} is not allowed with q.dtype={}; 16-bit KV must equal q's dtype (fp8 KV "
                        "may pair with either)",
                        to_string(p.kv_dtype), to_string(p.q_dtype)));
  if (p.device < 0) invalid(fmt::format("device={} is not allowed; it must be >= 0", p.device));
  constexpr int kMaxQ = kMaxQueryTokensPerRequest;
  if (p.q_len_per_req < 1 || p.q_len_per_req > kMaxQ)
    invalid(fmt::format("q_len_per_req={} is not allowed; allowed: 1 to {} query tokens per request (longer query "
                        "blocks: batch prefill)",
                        p.q_len_per_req, kMaxQ));
  if (p.max_q_len < 0 || p.max_q_len > kMaxQ)
    invalid(fmt::format("max_q_len={} is not allowed; allowed: 0 (every request has q_len_per_req tokens) or 1 to {}",
                        p.max_q_len, kMaxQ));
  if (p.max_q_len > 0 && p.q_len_per_req != 1 && p.q_len_per_req != p.max_q_len)
    invalid(fmt::format("q_len_per_req={} is not allowed with max_q_len={} (per-request query lengths); allowed: 1 or "
                        "{}",
                        p.q_len_per_req, p.max_q_len, p.max_q_len));
  if (p.draft_mask && max_query_tokens(p) < 2)
    invalid(fmt::format("draft_mask=true is not allowed with {} query token per request; the draft-tree mask is "
                        "speculative decoding's (q_len_per_req or max_q_len >= 2)",
                        max_query_tokens(p)));
  validate_decode_options(p.options);
}

int max_query_tokens(const BatchDecodeProblem& p) { return p.max_q_len > 0 ? p.max_q_len : p.q_len_per_req; }

void check_draft_mask(const BatchDecodeProblem& p, const uint32_t* mask, int row_words) {
  if (!p.draft_mask) {
    if (mask)
      invalid("draft_mask is set but this plan was made without draft_mask (its query tokens are causal); allowed: "
              "null, or a problem with draft_mask=true");
    return;
  }
  if (!mask)
    invalid("draft_mask is null; this plan has draft_mask=true and needs the uint32 mask rows on the device");
  const int need = (max_query_tokens(p) + 31) / 32;
  if (row_words < need)
    invalid(fmt::format("draft_mask_row_words={} is not allowed with {} query tokens per request; allowed: >= {} "
                        "(one bit per draft token, 32 a word)",
                        row_words, max_query_tokens(p), need));
}

int64_t query_token_rows(const BatchDecodeProblem& p, int64_t batch, int64_t q_rows, bool has_cum_seq_lens_q) {
  if (p.max_q_len == 0) {
    if (has_cum_seq_lens_q)
      invalid("cum_seq_lens_q is set but this problem has uniform query lengths (max_q_len=0); allowed: null, or a "
              "problem with max_q_len > 0");
    return batch * p.q_len_per_req;  // the tensor checks compare q's shape with it
  }
  if (!has_cum_seq_lens_q)
    invalid(fmt::format("cum_seq_lens_q is null; this problem has per-request query lengths (max_q_len={}) and "
                        "needs the int32 [batch + 1] device array",
                        p.max_q_len));
  const int64_t most = batch * p.max_q_len;
  if (q_rows < 1 || q_rows > most)
    invalid(fmt::format("q: {} token rows is not allowed with batch={} and max_q_len={}; allowed: 1 to {} "
                        "(cum_seq_lens_q[batch], at most max_q_len per request)",
                        q_rows, batch, p.max_q_len, most));
  return q_rows;
}

}  // namespace attnjit::ops

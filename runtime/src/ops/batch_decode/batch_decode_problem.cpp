#include "ops/batch_decode/batch_decode_problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <cmath>
#include <set>

#include "attnjit/error.hpp"

namespace attnjit::ops {

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw Error(Status::InvalidArgument, msg); }

void check_positive_finite(const std::optional<float>& v, const char* name) {
  if (v && !(std::isfinite(*v) && *v > 0.f))
    invalid(fmt::format("{}={} is not allowed; it must be a finite number > 0", name, *v));
}

const nlohmann::json* field(const nlohmann::json& j, const char* key) {
  return j.contains(key) ? &j.at(key) : nullptr;
}
int64_t int_of(const nlohmann::json& j, const char* key, int64_t fallback, bool required = false) {
  const auto* v = field(j, key);
  if (!v) {
    if (required) invalid(fmt::format("problem.{} is missing (an integer)", key));
    return fallback;
  }
  if (!v->is_number_integer()) invalid(fmt::format("problem.{}={} is not allowed; expected an integer", key, v->dump()));
  return v->get<int64_t>();
}
int int32_of(const nlohmann::json& j, const char* key, int fallback, bool required = false) {
  const int64_t v = int_of(j, key, fallback, required);
  if (v > INT_MAX || v < INT_MIN)
    invalid(fmt::format("problem.{}={} is not allowed; expected a 32-bit integer", key, v));
  return static_cast<int>(v);
}
std::string string_of(const nlohmann::json& j, const char* key, const char* fallback) {
  const auto* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_string()) invalid(fmt::format("problem.{}={} is not allowed; expected a string", key, v->dump()));
  return v->get<std::string>();
}
std::optional<float> float_of(const nlohmann::json& j, const char* key) {
  const auto* v = field(j, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) invalid(fmt::format("problem.{}={} is not allowed; expected a number", key, v->dump()));
  return v->get<float>();
}
bool bool_of(const nlohmann::json& j, const char* key, bool fallback) {
  const auto* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) invalid(fmt::format("problem.{}={} is not allowed; expected true or false", key, v->dump()));
  return v->get<bool>();
}

const std::set<std::string>& known_keys() {
  static const std::set<std::string> keys = {
      "op",          "batch_size",  "num_qo_heads",     "num_kv_heads", "head_dim",        "page_size",
      "page_table",  "host_lengths", "max_seq_len",     "q_dtype",      "kv_dtype",        "o_dtype",
      "kv_layout",   "pos_encoding_mode", "use_tensor_cores", "window_left", "logits_soft_cap", "sm_scale",
      "rope_scale",  "rope_theta",  "q_scale",          "k_scale",      "v_scale",         "return_lse",
      "use_cuda_graph", "device",   "kv_len",           "kv_lens",      "q_len_per_req",   "max_q_len",
      "draft_mask"};
  return keys;
}

const char* page_table_name(PageTable t) { return t == PageTable::BlockTable ? "block_table" : "indptr"; }

}  // namespace

BatchDecodeProblem batch_decode_problem_from_json(const nlohmann::json& j) {
  if (!j.is_object()) invalid(fmt::format("a batch_decode problem must be a JSON object, got {}", j.dump()));
  for (const auto& item : j.items())
    if (!known_keys().count(item.key()))
      invalid(fmt::format("problem.{} is not a batch_decode field; allowed: {}", item.key(),
                          fmt::join(known_keys(), ", ")));
  BatchDecodeProblem p;
  p.batch_size = int32_of(j, "batch_size", 1);
  p.num_qo_heads = int32_of(j, "num_qo_heads", 0, true);
  p.num_kv_heads = int32_of(j, "num_kv_heads", 0, true);
  p.head_dim = int32_of(j, "head_dim", 0, true);
  p.page_size = int32_of(j, "page_size", 16);
  const std::string table = string_of(j, "page_table", "indptr");
  if (table == "indptr") p.page_table = PageTable::IndptrIndices;
  else if (table == "block_table") p.page_table = PageTable::BlockTable;
  else invalid(fmt::format("problem.page_table='{}' is not allowed; allowed: indptr, block_table", table));
  p.host_lengths = bool_of(j, "host_lengths", true);
  p.max_seq_len = int_of(j, "max_seq_len", 0);
  p.q_len_per_req = int32_of(j, "q_len_per_req", 1);
  p.max_q_len = int32_of(j, "max_q_len", 0);
  p.draft_mask = bool_of(j, "draft_mask", false);
  p.device = int32_of(j, "device", 0);
  p.q_dtype = parse_dtype(string_of(j, "q_dtype", "bfloat16"), "problem.q_dtype");
  p.kv_dtype = j.contains("kv_dtype") ? parse_dtype(string_of(j, "kv_dtype", ""), "problem.kv_dtype") : p.q_dtype;
  p.o_dtype = j.contains("o_dtype") ? parse_dtype(string_of(j, "o_dtype", ""), "problem.o_dtype") : p.q_dtype;
  auto& o = p.options;
  o.kv_layout = parse_kv_layout(string_of(j, "kv_layout", "NHD"), "problem.kv_layout");
  o.pos_encoding_mode = parse_pos_encoding(string_of(j, "pos_encoding_mode", "NONE"), "problem.pos_encoding_mode");
  o.use_tensor_cores = bool_of(j, "use_tensor_cores", false);
  o.window_left = int32_of(j, "window_left", -1);
  o.logits_soft_cap = float_of(j, "logits_soft_cap");
  if (o.logits_soft_cap && *o.logits_soft_cap == 0.f) o.logits_soft_cap.reset();  // 0: no capping
  o.sm_scale = float_of(j, "sm_scale");
  o.rope_scale = float_of(j, "rope_scale");
  o.rope_theta = float_of(j, "rope_theta");
  o.q_scale = float_of(j, "q_scale");
  o.k_scale = float_of(j, "k_scale");
  o.v_scale = float_of(j, "v_scale");
  o.return_lse = bool_of(j, "return_lse", false);
  o.use_cuda_graph = bool_of(j, "use_cuda_graph", false);
  validate(p);
  return p;
}

std::vector<int32_t> kv_lens_from_json(const nlohmann::json& j, const BatchDecodeProblem& p) {
  if (const auto* v = field(j, "kv_lens")) {
    if (!v->is_array() || v->size() != size_t(p.batch_size))
      invalid(fmt::format("problem.kv_lens={} is not allowed; expected a list of batch_size={} lengths", v->dump(),
                          p.batch_size));
    std::vector<int32_t> lens;
    for (const auto& e : *v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT_MAX / 2)
        invalid(fmt::format("problem.kv_lens holds {}; each length must be an integer in [0, {}]", e.dump(),
                            INT_MAX / 2));
      lens.push_back(e.get<int32_t>());
    }
    return lens;
  }
  const int64_t fallback = p.max_seq_len > 0 ? p.max_seq_len : 1;
  const int64_t len = int_of(j, "kv_len", fallback);
  if (len < 1 || len > INT_MAX / 2)
    invalid(fmt::format("problem.kv_len={} is not allowed; it must be in [1, {}]", len, INT_MAX / 2));
  return std::vector<int32_t>(size_t(p.batch_size), static_cast<int32_t>(len));
}

nlohmann::json to_json(const BatchDecodeProblem& p) {
  const auto& o = p.options;
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
                      {"kv_layout", to_string(o.kv_layout)},
                      {"pos_encoding_mode", to_string(o.pos_encoding_mode)},
                      {"use_tensor_cores", o.use_tensor_cores},
                      {"window_left", o.window_left},
                      {"return_lse", o.return_lse},
                      {"use_cuda_graph", o.use_cuda_graph}};
  if (p.device != 0) j["device"] = p.device;
  // Only when speculative: one-token problems keep the JSON (and memo keys) they had.
  if (p.q_len_per_req != 1) j["q_len_per_req"] = p.q_len_per_req;
  if (p.max_q_len != 0) j["max_q_len"] = p.max_q_len;
  if (p.draft_mask) j["draft_mask"] = true;
  auto put = [&](const char* key, const std::optional<float>& v) {
    if (v) j[key] = *v;
  };
  put("logits_soft_cap", o.logits_soft_cap);
  put("sm_scale", o.sm_scale);
  put("rope_scale", o.rope_scale);
  put("rope_theta", o.rope_theta);
  put("q_scale", o.q_scale);
  put("k_scale", o.k_scale);
  put("v_scale", o.v_scale);
  return j;
}

void validate(const BatchDecodeProblem& p) {
  // The grid's y dimension holds the work items: at most batch + one wave.
  constexpr int kMaxBatch = 32768;
  if (p.batch_size < 1 || p.batch_size > kMaxBatch)
    invalid(fmt::format("batch_size={} is not allowed; allowed: 1 to {}", p.batch_size, kMaxBatch));
  if (p.num_qo_heads <= 0) invalid(fmt::format("num_qo_heads={} is not allowed; it must be > 0", p.num_qo_heads));
  if (p.num_kv_heads <= 0) invalid(fmt::format("num_kv_heads={} is not allowed; it must be > 0", p.num_kv_heads));
  if (p.num_qo_heads % p.num_kv_heads != 0)
    invalid(fmt::format("num_qo_heads={} is not allowed with num_kv_heads={}; it must be a multiple of it "
                        "(grouped-query attention)",
                        p.num_qo_heads, p.num_kv_heads));
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256 && p.head_dim != 512)
    throw Error(Status::Unsupported,
                fmt::format("head_dim={} is not supported; supported: 64, 128, 256, 512", p.head_dim));
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
  const auto& o = p.options;
  if (o.window_left < -1)
    invalid(fmt::format("window_left={} is not allowed; use -1 (no window) or >= 0", o.window_left));
  check_positive_finite(o.q_scale, "q_scale");
  check_positive_finite(o.k_scale, "k_scale");
  check_positive_finite(o.v_scale, "v_scale");
  check_positive_finite(o.sm_scale, "sm_scale");
  check_positive_finite(o.rope_scale, "rope_scale");
  check_positive_finite(o.rope_theta, "rope_theta");
  if (o.logits_soft_cap && !(std::isfinite(*o.logits_soft_cap) && *o.logits_soft_cap >= 0.f))
    invalid(fmt::format("logits_soft_cap={} is not allowed; it must be >= 0 (0: no capping)", *o.logits_soft_cap));
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

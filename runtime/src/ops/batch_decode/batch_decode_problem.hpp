// The batch-decode problem: its JSON form (manifests, explain, bench) and
// back, and validate, the only checks of a problem's fields. The entry points
// (batch_decode_entries.cpp) build problems from their own arguments.
#pragma once
#include <nlohmann/json.hpp>

#include <vector>

#include "attnjit/batch_decode.hpp"

namespace attnjit::ops {

// {"op": "batch_decode", "batch_size": 64, "num_qo_heads": 32, ...}. Plan
// inputs ride along for explain and bench: "kv_len" (every request) or
// "kv_lens" (a list); kv_lens_from_json reads them. Unknown keys and wrongly
// typed values are errors naming the key.
BatchDecodeProblem batch_decode_problem_from_json(const nlohmann::json& j);
nlohmann::json to_json(const BatchDecodeProblem& p);
// The lengths a JSON problem names (default: max_seq_len, else 1 per request).
std::vector<int32_t> kv_lens_from_json(const nlohmann::json& j, const BatchDecodeProblem& p);

// Throws Error(InvalidArgument / Unsupported) naming the field, its value and what is allowed.
void validate(const BatchDecodeProblem& p);

// The most query tokens a request has: max_q_len when the lengths vary
// (cum_seq_lens_q), else q_len_per_req. Sizes the grid and partial states.
int max_query_tokens(const BatchDecodeProblem& p);
// The token rows q, o and lse must have for `batch` requests, given q's
// first dimension: batch * q_len_per_req, or with per-request lengths
// (cum_seq_lens_q, on the device) q's own count, which must lie in [1, batch
// * max_q_len] -- the only consistency the host can check without reading
// the device array. Error(InvalidArgument) naming q or cum_seq_lens_q.
int64_t query_token_rows(const BatchDecodeProblem& p, int64_t batch, int64_t q_rows, bool has_cum_seq_lens_q);
// Speculative decoding's bound on query tokens per request: each token tile
// re-reads the request's K/V (from L2) and the partial states grow with it;
// longer query blocks are prefill's (batch prefill with a paged cache).
constexpr int kMaxQueryTokensPerRequest = 64;
// The draft-tree mask a run() gets against its problem: required (non-null,
// row_words >= ceil(max query tokens / 32)) iff problem.draft_mask, else
// null. Error(InvalidArgument) naming draft_mask / its row words.
void check_draft_mask(const BatchDecodeProblem& p, const uint32_t* mask, int row_words);

}  // namespace attnjit::ops

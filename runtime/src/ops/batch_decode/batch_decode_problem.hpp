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

}  // namespace attnjit::ops

// --variant FILE (prewarm, explain): a user variant (issue 31) as the spec's
// "user" JSON, {"score_mod": body, "mask_mod": body, "params": [{"name",
// "type", "rank"}, ...]}, put into the attention operators' problems. The
// operators check its fields ("problem.variant.<field>" in their messages).
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace attnjit::cli {

// The file's JSON object; InvalidArgument naming the file when it cannot be
// read, is not JSON or not an object.
nlohmann::json read_variant_file(const std::string& path);

// Adds `variant` to `problem` when its operator takes one (single and batch
// decode and prefill; false for the others, which are left as they are). A
// mask_mod decides every pair, so a prefill problem's causal=true becomes
// false (the mask_mod replaces it).
bool add_variant(nlohmann::json& problem, const nlohmann::json& variant);

}  // namespace attnjit::cli

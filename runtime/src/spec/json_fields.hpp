// Reading the fields of a kernel spec's or an operator problem's JSON with
// errors that name the field ("spec.head_dim", "problem.kv_len"), the value and
// the expected type (a manifest is written by hand; nlohmann's own messages say
// neither which field nor which spec).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "attnjit/types.hpp"

// A missing field without a fallback, or one of the wrong type, throws Error(InvalidArgument).
namespace attnjit::spec_json {

// Integers of a spec stay below 2^30 in magnitude, so products of two fields cannot overflow.
int int_field(const nlohmann::json& j, const char* key);
int int_field(const nlohmann::json& j, const char* key, int fallback);
bool bool_field(const nlohmann::json& j, const char* key, bool fallback);
std::string string_field(const nlohmann::json& j, const char* key);
std::string string_field(const nlohmann::json& j, const char* key, const char* fallback);

}  // namespace attnjit::spec_json

namespace attnjit::problem_json {

int int_field(const nlohmann::json& j, const char* key);  // a 32-bit integer
int int_field(const nlohmann::json& j, const char* key, int fallback);
int64_t int64_field(const nlohmann::json& j, const char* key);
int64_t int64_field(const nlohmann::json& j, const char* key, int64_t fallback);
bool bool_field(const nlohmann::json& j, const char* key, bool fallback);
std::string string_field(const nlohmann::json& j, const char* key, const char* fallback);
// An optional scalar option: absent or null gives nullopt.
std::optional<float> float_field(const nlohmann::json& j, const char* key);

// A problem is a JSON object whose every key is one of `keys`; `op` names the operator in
// messages ("a single_decode problem", "problem.x is not a single_decode field").
void require_keys(const nlohmann::json& j, const std::set<std::string>& keys, const std::string& op);

// What every attention problem (single and batch decode, single and batch prefill) reads alike:
// num_qo_heads, num_kv_heads and head_dim, each required, in that order.
template <class Problem>
void read_heads(const nlohmann::json& j, Problem& p) {
  p.num_qo_heads = int_field(j, "num_qo_heads");
  p.num_kv_heads = int_field(j, "num_kv_heads");
  p.head_dim = int_field(j, "head_dim");
}
// q_dtype (bfloat16 where absent), then kv_dtype (q_dtype where absent).
template <class Problem>
void read_dtypes(const nlohmann::json& j, Problem& p) {
  p.q_dtype = parse_dtype(string_field(j, "q_dtype", "bfloat16"), "problem.q_dtype");
  p.kv_dtype = parse_dtype(string_field(j, "kv_dtype", to_string(p.q_dtype)), "problem.kv_dtype");
}

}  // namespace attnjit::problem_json

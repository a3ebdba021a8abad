// What single and batch decode share about their options beyond every
// attention operator's (attention_options.hpp): tensor cores asked for, and
// the fp8 query scale.
#pragma once
#include <set>
#include <string>

#include "ops/attention_options/attention_options.hpp"

namespace attnjit::ops {

// attention_option_keys() and the decode-only keys.
const std::set<std::string>& decode_option_keys();

template <class Options>
void read_decode_options(const nlohmann::json& j, Options& o) {
  read_attention_options(j, o);
  o.use_tensor_cores = problem_json::bool_field(j, "use_tensor_cores", false);
  o.q_scale = problem_json::float_field(j, "q_scale");
}

template <class Options>
void put_decode_options(nlohmann::json& j, const Options& o) {
  put_attention_options(j, o);
  j["use_tensor_cores"] = o.use_tensor_cores;
  if (o.q_scale) j["q_scale"] = *o.q_scale;
}

template <class Options>
void validate_decode_options(const Options& o) {
  validate_attention_options(o);
  check_positive_finite(o.q_scale, "q_scale");
}

}  // namespace attnjit::ops

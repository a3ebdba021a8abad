// The options every attention operator (single and batch decode, single and
// batch prefill) shares: their keys in a problem's JSON form, reading and
// writing them, and their checks. Each operator's options struct is its own
// public type (attnjit/<op>.hpp), so these are templates over the common fields:
// kv_layout, pos_encoding_mode, window_left, logits_soft_cap, sm_scale,
// rope_scale, rope_theta, k_scale, v_scale, return_lse and variant.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <string>

#include "attnjit/types.hpp"
#include "ops/attention_options/user_variant_options.hpp"
#include "spec/json_fields.hpp"

namespace attnjit::ops {

const std::set<std::string>& attention_option_keys();

// Error(InvalidArgument) unless v is unset or a finite number > 0.
void check_positive_finite(const std::optional<float>& v, const char* name);
// window_left is -1 or >= 0; logits_soft_cap unset or finite >= 0.
void check_window_and_cap(int window_left, const std::optional<float>& logits_soft_cap);
// Head counts > 0, grouped-query (num_qo_heads a multiple of num_kv_heads), head_dim 64, 128, 256 or 512.
void validate_heads(int num_qo_heads, int num_kv_heads, int head_dim);

template <class Options>
void read_attention_options(const nlohmann::json& j, Options& o) {
  o.kv_layout = parse_kv_layout(problem_json::string_field(j, "kv_layout", "NHD"), "problem.kv_layout");
  o.pos_encoding_mode =
      parse_pos_encoding(problem_json::string_field(j, "pos_encoding_mode", "NONE"), "problem.pos_encoding_mode");
  o.window_left = problem_json::int_field(j, "window_left", -1);
  o.logits_soft_cap = problem_json::float_field(j, "logits_soft_cap");
  if (o.logits_soft_cap && *o.logits_soft_cap == 0.f) o.logits_soft_cap.reset();  // 0: no capping
  o.sm_scale = problem_json::float_field(j, "sm_scale");
  o.rope_scale = problem_json::float_field(j, "rope_scale");
  o.rope_theta = problem_json::float_field(j, "rope_theta");
  o.k_scale = problem_json::float_field(j, "k_scale");
  o.v_scale = problem_json::float_field(j, "v_scale");
  o.return_lse = problem_json::bool_field(j, "return_lse", false);
  o.variant = variant_from_problem_json(j);
}

// Unset optional scalars are left out, so equal problems write equal JSON (the memo and cache keys).
template <class Options>
void put_attention_options(nlohmann::json& j, const Options& o) {
  j["kv_layout"] = to_string(o.kv_layout);
  j["pos_encoding_mode"] = to_string(o.pos_encoding_mode);
  j["window_left"] = o.window_left;
  j["return_lse"] = o.return_lse;
  auto put = [&](const char* key, const std::optional<float>& v) {
    if (v) j[key] = *v;
  };
  put("logits_soft_cap", o.logits_soft_cap);
  put("sm_scale", o.sm_scale);
  put("rope_scale", o.rope_scale);
  put("rope_theta", o.rope_theta);
  put("k_scale", o.k_scale);
  put("v_scale", o.v_scale);
  put_variant_json(j, o.variant);
}

// The fields a wrapper's plan arguments hand on to its problem's options
// unchanged (both name them alike); the caller sets the rest.
template <class PlanArgs, class Options>
void copy_plan_args(const PlanArgs& a, Options& o) {
  o.pos_encoding_mode = a.pos_encoding_mode;
  o.window_left = a.window_left;
  o.logits_soft_cap = a.logits_soft_cap;
  if (o.logits_soft_cap && *o.logits_soft_cap == 0.f) o.logits_soft_cap.reset();  // 0: no capping
  o.sm_scale = a.sm_scale;
  o.rope_scale = a.rope_scale;
  o.rope_theta = a.rope_theta;
  o.variant = a.variant;
}

template <class Options>
void validate_attention_options(const Options& o) {
  check_window_and_cap(o.window_left, o.logits_soft_cap);
  check_positive_finite(o.sm_scale, "sm_scale");
  check_positive_finite(o.rope_scale, "rope_scale");
  check_positive_finite(o.rope_theta, "rope_theta");
  check_positive_finite(o.k_scale, "k_scale");
  check_positive_finite(o.v_scale, "v_scale");
}

}  // namespace attnjit::ops

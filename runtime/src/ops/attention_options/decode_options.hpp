// What single and batch decode share about their options beyond every
// attention operator's (attention_options.hpp): tensor cores asked for, the
// fp8 query scale, and what a decode plan derives from them (the kernel
// choice's shape, the run-time scales).
#pragma once
#include <cmath>
#include <initializer_list>
#include <set>
#include <string>

#include "ops/attention_options/attention_options.hpp"
#include "ops/decode_choice.hpp"
#include "ops/operator.hpp"

namespace attnjit::ops {

// attention_option_keys() and the decode-only keys.
const std::set<std::string>& decode_option_keys();
// What a decode problem's JSON may hold: decode_option_keys() and the operator's own keys.
std::set<std::string> decode_problem_keys(std::initializer_list<const char*> own);

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

// The kernel choice's shape of a decode problem whose output is in o_dtype,
// on a device with these figures; batch decode adds its query tokens.
template <class Problem>
DecodeShape decode_shape(const Problem& p, DType o_dtype, const DeviceFigures& device) {
  DecodeShape shape;
  shape.smem_per_block = device.smem_per_block;
  shape.num_qo_heads = p.num_qo_heads;
  shape.num_kv_heads = p.num_kv_heads;
  shape.head_dim = p.head_dim;
  shape.q_dtype = p.q_dtype;
  shape.kv_dtype = p.kv_dtype;
  shape.o_dtype = o_dtype;
  shape.pos_encoding = p.options.pos_encoding_mode;
  shape.soft_cap = p.options.logits_soft_cap.value_or(0.f) > 0.f;
  shape.use_tensor_cores = p.options.use_tensor_cores;
  shape.user = user_source(p.options.variant);
  return shape;
}

// A decode layout's run-time scales: q and k scales fold into sm_scale
// (default 1/sqrt(head_dim)); soft cap 0 is none; RoPE as 1/scale and log2(theta).
template <class Layout, class Options>
void set_decode_scales(Layout& layout, const Options& o, int head_dim) {
  const float q_scale = o.q_scale.value_or(1.f), k_scale = o.k_scale.value_or(1.f);
  layout.sm_scale = o.sm_scale.value_or(1.f / std::sqrt(float(head_dim))) * q_scale * k_scale;
  layout.v_scale = o.v_scale.value_or(1.f);
  layout.soft_cap = o.logits_soft_cap.value_or(0.f);
  layout.rope_rcp_scale = 1.f / o.rope_scale.value_or(1.f);
  layout.rope_log2_theta = std::log2(o.rope_theta.value_or(1e4f));
}

}  // namespace attnjit::ops

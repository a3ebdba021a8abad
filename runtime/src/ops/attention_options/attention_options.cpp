#include "ops/attention_options/attention_options.hpp"

#include <fmt/format.h>

#include <cmath>

#include "attnjit/error.hpp"
#include "invalid_argument.hpp"

namespace attnjit::ops {

const std::set<std::string>& attention_option_keys() {
  static const std::set<std::string> keys = {"kv_layout", "pos_encoding_mode", "window_left", "logits_soft_cap",
                                             "sm_scale",  "rope_scale",        "rope_theta",  "k_scale",
                                             "v_scale",   "return_lse",        "variant"};
  return keys;
}

void check_positive_finite(const std::optional<float>& v, const char* name) {
  if (v && !(std::isfinite(*v) && *v > 0.f))
    invalid(fmt::format("{}={} is not allowed; it must be a finite number > 0", name, *v));
}

void check_window_and_cap(int window_left, const std::optional<float>& logits_soft_cap) {
  if (window_left < -1)
    invalid(fmt::format("window_left={} is not allowed; use -1 (no window) or >= 0", window_left));
  if (logits_soft_cap && !(std::isfinite(*logits_soft_cap) && *logits_soft_cap >= 0.f))
    invalid(fmt::format("logits_soft_cap={} is not allowed; it must be >= 0 (0: no capping)", *logits_soft_cap));
}

void validate_heads(int num_qo_heads, int num_kv_heads, int head_dim) {
  if (num_qo_heads <= 0) invalid(fmt::format("num_qo_heads={} is not allowed; it must be > 0", num_qo_heads));
  if (num_kv_heads <= 0) invalid(fmt::format("num_kv_heads={} is not allowed; it must be > 0", num_kv_heads));
  if (num_qo_heads % num_kv_heads != 0)
    invalid(fmt::format("num_qo_heads={} is not allowed; it must be a multiple of num_kv_heads={} (grouped-query "
                        "attention)",
                        num_qo_heads, num_kv_heads));
  if (head_dim != 64 && head_dim != 128 && head_dim != 256 && head_dim != 512)
    throw Error(Status::Unsupported,
                fmt::format("head_dim={} is not supported; supported: 64, 128, 256, 512", head_dim));
}

}  // namespace attnjit::ops

#include "api/c_api_convert.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <cmath>
#include <optional>

#include "attnjit/error.hpp"

namespace attnjit::capi {

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw Error(Status::InvalidArgument, msg); }

std::optional<float> provided(float value, const char* field) {
  if (!std::isfinite(value))
    invalid(fmt::format("options->{}={} is not finite; allowed: a finite value, or 0 for the default", field, value));
  if (value == 0.0f) return std::nullopt;
  return value;
}

std::string shape_of(const TensorView& t) {
  return fmt::format("[{}]", fmt::join(t.shape.begin(), t.shape.begin() + t.ndim, ", "));
}

int narrow_dim(int64_t value, const char* arg, int index, const char* meaning) {
  if (value > INT_MAX)
    invalid(fmt::format("{}: shape[{}]={} ({}) is too large; allowed: <= {}", arg, index, value, meaning, INT_MAX));
  return static_cast<int>(value);
}

}  // namespace

SingleDecodeOptions to_options(const attnjit_decode_options_t* options, bool return_lse) {
  SingleDecodeOptions o;
  o.return_lse = return_lse;
  if (options == nullptr) return o;

  switch (options->kv_layout) {
    case ATTNJIT_KV_LAYOUT_NHD: o.kv_layout = KVLayout::NHD; break;
    case ATTNJIT_KV_LAYOUT_HND: o.kv_layout = KVLayout::HND; break;
    default:
      invalid(fmt::format("options->kv_layout={} is not a layout; allowed: 0 (NHD), 1 (HND)", options->kv_layout));
  }
  switch (options->pos_encoding_mode) {
    case ATTNJIT_POS_ENCODING_NONE: o.pos_encoding_mode = PosEncoding::None; break;
    case ATTNJIT_POS_ENCODING_ROPE_LLAMA: o.pos_encoding_mode = PosEncoding::RopeLlama; break;
    case ATTNJIT_POS_ENCODING_ALIBI: o.pos_encoding_mode = PosEncoding::Alibi; break;
    default:
      invalid(fmt::format("options->pos_encoding_mode={} is not a positional encoding; "
                          "allowed: 0 (NONE), 1 (ROPE_LLAMA), 2 (ALIBI)",
                          options->pos_encoding_mode));
  }
  if (options->use_tensor_cores != 0 && options->use_tensor_cores != 1)
    invalid(fmt::format("options->use_tensor_cores={} is not a flag; allowed: 0, 1", options->use_tensor_cores));
  o.use_tensor_cores = options->use_tensor_cores == 1;
  if (options->window_left < -1)
    invalid(fmt::format("options->window_left={} is not allowed; allowed: -1 (whole sequence) or >= 0",
                        options->window_left));
  o.window_left = options->window_left;

  o.q_scale = provided(options->q_scale, "q_scale");
  o.k_scale = provided(options->k_scale, "k_scale");
  o.v_scale = provided(options->v_scale, "v_scale");
  o.logits_soft_cap = provided(options->logits_soft_cap, "logits_soft_cap");
  o.sm_scale = provided(options->sm_scale, "sm_scale");
  o.rope_scale = provided(options->rope_scale, "rope_scale");
  o.rope_theta = provided(options->rope_theta, "rope_theta");
  return o;
}

SingleDecodeProblem to_problem(const TensorView& q, const TensorView& k, const TensorView& v,
                               const SingleDecodeOptions& options) {
  const bool nhd = options.kv_layout == KVLayout::NHD;
  const char* kv_shape = nhd ? "[kv_len, num_kv_heads, head_dim] for kv_layout NHD"
                             : "[num_kv_heads, kv_len, head_dim] for kv_layout HND";
  if (q.ndim != 2)
    invalid(fmt::format("q: ndim={} (shape {}) is not allowed; allowed: 2, [num_qo_heads, head_dim]", q.ndim,
                        shape_of(q)));
  if (k.ndim != 3)
    invalid(fmt::format("k: ndim={} (shape {}) is not allowed; allowed: 3, {}", k.ndim, shape_of(k), kv_shape));
  if (v.ndim != 3)
    invalid(fmt::format("v: ndim={} (shape {}) is not allowed; allowed: 3, {}", v.ndim, shape_of(v), kv_shape));
  if (v.shape != k.shape)
    invalid(fmt::format("v: shape {} differs from k's shape {}; they must be equal", shape_of(v), shape_of(k)));
  if (v.dtype != k.dtype)
    invalid(fmt::format("v: dtype {} differs from k's dtype {}; they must be equal", to_string(v.dtype),
                        to_string(k.dtype)));
  if (k.shape[2] != q.shape[1])
    invalid(fmt::format("k: head_dim (shape[2])={} differs from q's head_dim (shape[1])={}; they must be equal",
                        k.shape[2], q.shape[1]));
  if (k.device != q.device)
    invalid(fmt::format("k: device cuda:{} differs from q's device cuda:{}; all tensors must be on one device",
                        k.device, q.device));
  if (v.device != q.device)
    invalid(fmt::format("v: device cuda:{} differs from q's device cuda:{}; all tensors must be on one device",
                        v.device, q.device));

  SingleDecodeProblem p;
  p.num_qo_heads = narrow_dim(q.shape[0], "q", 0, "num_qo_heads");
  p.head_dim = narrow_dim(q.shape[1], "q", 1, "head_dim");
  p.num_kv_heads = narrow_dim(k.shape[nhd ? 1 : 0], "k", nhd ? 1 : 0, "num_kv_heads");
  p.kv_len = k.shape[nhd ? 0 : 1];
  p.q_dtype = q.dtype;
  p.kv_dtype = k.dtype;
  p.device = q.device;
  p.options = options;
  return p;
}

}  // namespace attnjit::capi

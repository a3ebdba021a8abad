// What every prefill operator (single, ragged, paged) shares about its
// options beyond every attention operator's (attention_options.hpp): reading
// them from a problem's JSON, writing them back, checking them, and turning
// them into the kernel's variant and run-time scalars.
#pragma once
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "attnjit/prefill.hpp"
#include "ops/attention_options/attention_options.hpp"
#include "prefill_params.h"
#include "spec/prefill_kernel.hpp"

namespace attnjit::ops {

// The option keys of a prefill problem's JSON form (attention_option_keys() and the prefill-only ones).
const std::set<std::string>& prefill_option_keys();
PrefillOptions prefill_options_from_json(const nlohmann::json& j);
void put_prefill_options(nlohmann::json& j, const PrefillOptions& o);

// Throws Error(InvalidArgument / Unsupported) naming the option, its value and what is allowed.
void validate_prefill_options(const PrefillOptions& o);
// Shapes and dtypes shared by all prefill problems.
void validate_prefill_heads(int num_qo_heads, int num_kv_heads, int head_dim, DType q_dtype, DType kv_dtype);

// The output dtype and fp8 q (Unsupported, naming the argument): with 16-bit
// q, o_dtype unset or q's; with float8_e4m3fn q (K/V e4m3, checked by
// validate_prefill_heads) o_dtype float16 or bfloat16, head_dim 128, backend
// 'auto' or 'fa3_ws', no RoPE / ALiBi, soft cap or user variant, and a
// contiguous or ragged KV source.
void validate_prefill_dtypes(const PrefillOptions& o, int head_dim, DType q_dtype, KVSource source);
// The output's dtype: options.o_dtype, unset q's.
inline DType prefill_o_dtype(const PrefillOptions& o, DType q_dtype) { return o.o_dtype.value_or(q_dtype); }

// The kernel's variant (dtypes, encoding, cap, mask mode) and whether it checks a window.
PrefillKernel prefill_variant(const PrefillOptions& o, int head_dim, DType q_dtype, DType kv_dtype);
// The skeleton for a device's arch: fa3 (Hopper) where the options allow it
// ("auto" or "fa3"), the K/V is 16-bit and the head at most 256 wide, else
// fa2. Unsupported: "fa3" asked of another arch, of fp8 K/V or of head_dim 512.
PrefillBackend prefill_backend(const PrefillOptions& o, DType kv_dtype, const std::string& arch, int head_dim);
// Whether the Hopper skeletons take this head_dim (512 is fa2's only).
inline bool fa3_takes_head_dim(int head_dim) { return head_dim <= 256; }
// Unsupported: a Hopper backend ('fa3', 'fa3_ws') asked for by name with a head_dim it does not take.
void validate_prefill_backend(const PrefillOptions& o, int head_dim);
// sm_scale, soft cap and RoPE scalars resolved from the defaults; pointers left null.
kernels::VariantParams prefill_variant_params(const PrefillOptions& o, int head_dim);

}  // namespace attnjit::ops

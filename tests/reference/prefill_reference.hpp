// Double-precision reference for prefill / append attention of one request,
// written from the definition (FlashInfer's semantics), independent of the
// kernel's tiling: query i sits at position kv_len - qo_len + i; causal keeps
// keys at or before it, the window keys at or after position - window_left,
// a custom mask (row-major [qo_len, kv_len], true = attend) replaces causal.
#pragma once
#include <cstdint>
#include <vector>

#include "attnjit/prefill.hpp"

namespace attnjit::test {

struct PrefillRequestShape {
  int num_qo_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t qo_len = 0, kv_len = 0;
};

struct PrefillReference {
  std::vector<double> o;    // [qo_len, num_qo_heads, head_dim]
  std::vector<double> lse;  // [qo_len, num_qo_heads], base 2; -inf for a row that sees no key
};

// q [qo_len, H, D]; k, v [kv_len, H_kv, D] (logical NHD, whatever the layout
// the kernel reads), k and v already dequantized from their storage dtype
// (k_scale, v_scale applied here); `mask` used when options.custom_mask.
PrefillReference reference_prefill(const PrefillRequestShape& s, const PrefillOptions& options,
                                   const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v, const std::vector<bool>* mask);

}  // namespace attnjit::test

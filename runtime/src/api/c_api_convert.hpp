// C structs and DLTensors → the C++ API's types, validating everything the C
// side can get wrong (enum values, flags, non-finite floats, ranks and
// shapes that disagree) with messages that name the C parameter.
#pragma once
#include "attnjit/attnjit.h"
#include "attnjit/single_decode.hpp"
#include "attnjit/tensor.hpp"

namespace attnjit::capi {

// `options` NULL means all defaults. A float field of 0 means "not provided"
// (std::nullopt), as attnjit.h documents.
SingleDecodeOptions to_options(const attnjit_decode_options_t* options, bool return_lse);

// q [num_qo_heads, head_dim]; k and v [kv_len, num_kv_heads, head_dim] (NHD)
// or [num_kv_heads, kv_len, head_dim] (HND), with equal shapes and dtypes;
// all on q's device. Head-count divisibility and supported sizes are the
// plan's to judge, not ours.
SingleDecodeProblem to_problem(const TensorView& q, const TensorView& k, const TensorView& v,
                               const SingleDecodeOptions& options);

}  // namespace attnjit::capi

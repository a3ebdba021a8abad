// The single-decode problem in its three forms, each made in one place:
// from tensors (the C++ one-call API and the C API), from JSON (manifests,
// `explain`, the registry) and back; plus normalize and validate, the only
// checks of a problem's fields.
#pragma once
#include <nlohmann/json.hpp>

#include "attnjit/single_decode.hpp"
#include "attnjit/tensor.hpp"

namespace attnjit::ops {

// Shapes, dtypes and device from q [H_qo, D] and k, v per options.kv_layout;
// Error(InvalidArgument) naming the tensor, its value and what is allowed.
SingleDecodeProblem single_decode_problem_from_tensors(const TensorView& q, const TensorView& k, const TensorView& v,
                                                       const SingleDecodeOptions& options);

// The manifest form: {"op": "single_decode", "num_qo_heads": 32, ...}; kv_len
// defaults to 1 (the kernel set does not depend on it). Unknown keys and
// wrongly typed values are errors naming the key.
SingleDecodeProblem single_decode_problem_from_json(const nlohmann::json& j);
nlohmann::json to_json(const SingleDecodeProblem& p);

// Throws Error(InvalidArgument / Unsupported) naming the offending field.
void validate(const SingleDecodeProblem& p);

}  // namespace attnjit::ops

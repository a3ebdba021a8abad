// The single-prefill problem from tensors, from JSON and back, and its checks.
#pragma once
#include <nlohmann/json.hpp>

#include "attnjit/prefill.hpp"
#include "attnjit/tensor.hpp"

namespace attnjit::ops {

// q [qo_len, H_qo, D]; k, v per options.kv_layout. Error(InvalidArgument)
// naming the tensor, its value and what is allowed.
SinglePrefillProblem single_prefill_problem_from_tensors(const TensorView& q, const TensorView& k,
                                                         const TensorView& v, const PrefillOptions& options);

// {"op": "single_prefill", "num_qo_heads": 32, "qo_len": 512, "kv_len": 512, ...};
// qo_len and kv_len default to 1 (the kernel set depends on neither).
SinglePrefillProblem single_prefill_problem_from_json(const nlohmann::json& j);
nlohmann::json to_json(const SinglePrefillProblem& p);

void validate(const SinglePrefillProblem& p);

// run()'s mask argument against the problem: present exactly when planned
// with custom_mask, and at least ceil(qo_len * kv_len / 8) bytes.
void check_custom_mask(const SinglePrefillProblem& p, const PackedMask* mask);

}  // namespace attnjit::ops

// The batch-prefill problem of the operator registry (prewarm manifests,
// explain, bench): what a ragged or paged prefill wrapper is created and
// planned with, as one struct, from its JSON form and back, and validate,
// the only check of its fields. The wrappers take their own arguments
// (batch_prefill_wrappers.cpp); this is the tools' face of the same shape.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "attnjit/prefill.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"

namespace attnjit::ops {

struct BatchPrefillProblem {
  KVSource source = KVSource::Ragged;  // Ragged or Paged
  int page_size = 0;                   // paged: tokens per page (>= 1); ragged: 0
  int num_qo_heads = 0, num_kv_heads = 0, head_dim = 0;
  DType q_dtype = DType::BF16, kv_dtype = DType::BF16;
  PrefillOptions options;  // kv_layout and backend are the wrapper's; the rest the plan's or the run's
  bool use_cuda_graph = false;
  int max_batch_size = 0;  // use_cuda_graph: the fixed buffers' batch (>= 1); else 0
  int device = 0;
  // Optional (explain, bench): every request's query and KV tokens. Empty:
  // not given; the kernel set depends on neither.
  std::vector<int32_t> qo_lens, kv_lens;

  bool has_lengths() const { return !kv_lens.empty(); }
};

// {"op": "batch_prefill", "kv_source": "ragged" | "paged", "page_size": 16
// (paged), "num_qo_heads", "num_kv_heads", "head_dim", "q_dtype", "kv_dtype",
// the prefill options (causal, custom_mask, kv_layout, pos_encoding_mode,
// window_left, logits_soft_cap, sm_scale, rope_scale, rope_theta, backend,
// return_lse, k_scale, v_scale), "use_cuda_graph" with "max_batch_size",
// "device"}; lengths as lists "qo_lens" and "kv_lens", or one length for
// every request: "batch_size" (default 1), "qo_len", "kv_len" (either side
// defaults to the other: a fresh prefill). Unknown keys and wrongly typed
// values are errors naming the key. to_json writes the lengths as lists.
BatchPrefillProblem batch_prefill_problem_from_json(const nlohmann::json& j);
nlohmann::json to_json(const BatchPrefillProblem& p);

// Throws Error(InvalidArgument / Unsupported) naming the field, its value and what is allowed.
void validate(const BatchPrefillProblem& p);

// The planner's shape for the problem's lengths (Error(InvalidArgument) when
// it has none): index arrays as the wrappers derive them (paged: pages of
// page_size tokens, one page id each; a custom mask's packed bytes).
BatchPrefillShape planner_shape(const BatchPrefillProblem& p);

}  // namespace attnjit::ops

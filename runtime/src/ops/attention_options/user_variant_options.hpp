// A user variant (attnjit/variant.hpp) on the attention operators: what a
// planner adds to its kernels, what it refuses, and what run() packs. The
// planners call these, so every operator treats a variant the same way; the
// plan keeps only the source (compile-time), the values come with each run.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>

#include "attnjit/variant.hpp"
#include "spec/decode_kernel.hpp"
#include "spec/prefill_kernel.hpp"
#include "variant_params.h"

namespace attnjit::ops {

// Prefill: a mask_mod plans the Custom mode (the skeletons test every tile,
// or with block_sparse the tiles its classes keep) and so cannot be mixed with
// causal=true or a packed custom mask (InvalidArgument: write them into the
// mask_mod). Every prefill skeleton takes it (fa3_ws tests each row with its
// own head). Null: nothing.
void apply_user_variant(const std::shared_ptr<const VariantSource>& v, bool causal, bool custom_mask,
                        PrefillKernel& k);
// A block-sparse variant (VariantSource::block_sparse) where `op` has no
// block mask (decode: its skeletons have no KV tiles to skip; batch prefill:
// not yet): Unsupported naming block_sparse and op. Null: nothing.
void refuse_block_sparse(const VariantSource* v, const char* op);
// Those refusals alone, for the problem checks that run before any device is asked.
void check_prefill_user_variant(const VariantSource* v, bool causal, bool custom_mask);
// Decode: the planned mode stays (none, or causal for several tokens) and
// decides which keys are visited; a mask_mod replaces its test. Draft
// (TensorRT-LLM's tree rows) with a mask_mod is refused.
void apply_user_variant(const std::shared_ptr<const VariantSource>& v, DecodeKernel& k);

// Fills var.user_params from `given` for a plan compiled with `planned`:
// InvalidArgument when one is missing, their sources differ, or a param is
// not bound (naming it). Both null: nothing.
void pack_user_params(const VariantSource* planned, const Variant* given, kernels::VariantParams& var, int device);

// The source of an options struct's variant, or null.
inline std::shared_ptr<const VariantSource> user_source(const std::shared_ptr<const Variant>& v) {
  return v ? v->shared_source() : nullptr;
}

// A problem's JSON key "variant": the source (snippets and declaration, the
// kernel spec's "user" form), absent without one so built-in problems keep
// their JSON. The one-call entry points memoize plans by this JSON, so two
// variants never share a plan. Read back, it is a Variant with no value bound.
void put_variant_json(nlohmann::json& j, const std::shared_ptr<const Variant>& v);
std::shared_ptr<const Variant> variant_from_problem_json(const nlohmann::json& j);

}  // namespace attnjit::ops

#include "ops/attention_options/user_variant_options.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "spec/user_variant.hpp"

namespace attnjit::ops {

void check_prefill_user_variant(const VariantSource* v, bool causal, bool custom_mask) {
  if (!v) return;
  const bool mask_mod = !v->mask_mod.empty();
  if (mask_mod && (causal || custom_mask))
    throw Error(Status::InvalidArgument,
                fmt::format("{} with a variant's mask_mod is not allowed: the mask_mod decides every pair; write "
                            "the {} test into it",
                            custom_mask ? "custom_mask" : "causal=True", custom_mask ? "mask's" : "causal"));
}

void apply_user_variant(const std::shared_ptr<const VariantSource>& v, bool causal, bool custom_mask,
                        PrefillKernel& k) {
  if (!v) return;
  check_prefill_user_variant(v.get(), causal, custom_mask);
  k.variant.user = v;
  if (!v->mask_mod.empty()) k.variant.mask = MaskMode::Custom;
}

void refuse_block_sparse(const VariantSource* v, const char* op) {
  if (v && v->block_sparse)
    throw Error(Status::Unsupported,
                fmt::format("variant user{} has block_sparse=true, which {} does not take; allowed there: a variant "
                            "with block_sparse=false (the same mask_mod, every pair tested)",
                            variant_source_digest(*v), op));
}

void apply_user_variant(const std::shared_ptr<const VariantSource>& v, DecodeKernel& k) {
  if (!v) return;
  refuse_block_sparse(v.get(), "decode (its skeletons have no KV tiles to skip)");
  if (!v->mask_mod.empty() && k.variant.mask == MaskMode::Draft)
    throw Error(Status::InvalidArgument, "a draft-tree mask with a variant's mask_mod is not allowed: the mask_mod "
                                         "decides every pair; write the tree into it");
  k.variant.user = v;
}

void pack_user_params(const VariantSource* planned, const Variant* given, kernels::VariantParams& var, int device) {
  if (!planned && !given) return;
  if (!planned)
    throw Error(Status::InvalidArgument, "variant: given at run() to a plan made without one; plan with it");
  if (!given)
    throw Error(Status::InvalidArgument,
                fmt::format("variant: the plan was made with variant user{}; run() needs it (with its params bound)",
                            variant_source_digest(*planned)));
  if (!(given->source() == *planned))
    throw Error(Status::InvalidArgument,
                fmt::format("variant: run() got user{}, the plan was made with user{}; plan again for another "
                            "variant",
                            variant_source_digest(given->source()), variant_source_digest(*planned)));
  static_assert(sizeof(var.user_params) == Variant::kMaxParamsBytes, "the kernels' blob");
  given->pack(var.user_params, device);
}

void put_variant_json(nlohmann::json& j, const std::shared_ptr<const Variant>& v) {
  if (v) j["variant"] = variant_source_json(v->source());
}

std::shared_ptr<const Variant> variant_from_problem_json(const nlohmann::json& j) {
  if (!j.contains("variant") || j.at("variant").is_null()) return nullptr;
  return std::make_shared<const Variant>(variant_source_from_json(j.at("variant"), "problem.variant"));
}

}  // namespace attnjit::ops

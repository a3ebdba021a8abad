#include "spec/block_mask_kernel.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "block_mask_params.h"
#include "spec/user_variant.hpp"

namespace attnjit {

std::string BlockMaskKernel::name() const {
  return "block_mask_user" + (user ? variant_source_digest(*user) : std::string("?"));
}

int BlockMaskKernel::threads() const { return kernels::kBlockMaskThreads; }

nlohmann::json BlockMaskKernel::to_json() const {
  nlohmann::json j = {{"family", kFamily}};
  if (user) j["user"] = variant_source_json(*user);
  return j;
}

BlockMaskKernel BlockMaskKernel::from_json(const nlohmann::json& j) {
  BlockMaskKernel s;
  if (!j.contains("user"))
    throw Error(Status::InvalidArgument,
                "block_mask spec.user is missing; expected the variant's source (a block-sparse mask_mod)");
  s.user = std::make_shared<const VariantSource>(variant_source_from_json(j.at("user"), "spec.user"));
  s.validate();
  return s;
}

void BlockMaskKernel::validate() const {
  if (!user)
    throw Error(Status::InvalidArgument, "block_mask spec.user is null; expected a block-sparse variant's source");
  if (!user->block_sparse || user->mask_mod.empty())
    throw Error(Status::InvalidArgument,
                fmt::format("block_mask spec.user (user{}) is not allowed: block_sparse={} with {}; allowed: a "
                            "mask_mod with block_sparse=true",
                            variant_source_digest(*user), user->block_sparse, user->mask_mod.empty() ? "no mask_mod" : "a mask_mod"));
}

}  // namespace attnjit

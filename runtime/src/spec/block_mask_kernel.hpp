// The block-mask family (issue 31 item 2): the kernel that classifies a
// block-sparse user variant's (query tile, KV tile) pairs by its mask_mod
// (kernels/block_mask.cuh) before the prefill kernel of the same variant
// walks them. Its only compile-time input is the variant's source: tile
// shapes, lengths and heads are run-time values, so one cubin serves every
// prefill kernel and plan of the variant.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/variant.hpp"

namespace attnjit {

struct BlockMaskKernel {
  static constexpr const char* kFamily = "block_mask";

  std::shared_ptr<const VariantSource> user;  // block_sparse, with a mask_mod

  const char* template_name() const { return "block_mask.cu.in"; }
  const char* entry_name() const { return "attnjit_block_mask"; }
  std::string name() const;  // "block_mask_user<12 hex>"
  int threads() const;
  bool supports_arch(const std::string& /*arch*/) const { return true; }  // every known arch
  int dynamic_smem_bytes() const { return 0; }
  nlohmann::json to_json() const;
  static BlockMaskKernel from_json(const nlohmann::json& j);
  std::vector<std::pair<std::string, std::string>> template_values() const { return {}; }
  void validate() const;

  bool operator==(const BlockMaskKernel& o) const { return user == o.user || (user && o.user && *user == *o.user); }
};

}  // namespace attnjit

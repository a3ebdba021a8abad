// The state-merge family: combines partial attention states (normalized o,
// base-2 lse) computed over disjoint KV chunks (kernels/merge.cuh).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "attnjit/types.hpp"

namespace attnjit {

struct MergeKernel {
  static constexpr const char* kFamily = "merge_states";

  int head_dim = 128;
  DType o_dtype = DType::F16;
  int warps = 4;
  DType in_dtype = DType::F32;  // the partial states' type: f32 from split KV, the caller's for merge_state(s)

  const char* template_name() const { return "merge_states.cu.in"; }
  const char* entry_name() const { return "attnjit_merge_states"; }
  std::string name() const;  // "merge_states_d128_bf16_w4" ("..._in_bf16" for 16-bit inputs)
  int threads() const { return warps * 32; }
  bool supports_arch(const std::string& /*arch*/) const { return true; }  // every known arch
  int dynamic_smem_bytes() const { return 0; }
  nlohmann::json to_json() const;
  static MergeKernel from_json(const nlohmann::json& j);
  std::vector<std::pair<std::string, std::string>> template_values() const;
  void validate() const;

  bool operator==(const MergeKernel& o) const {
    return head_dim == o.head_dim && o_dtype == o.o_dtype && warps == o.warps && in_dtype == o.in_dtype;
  }
};

}  // namespace attnjit

// Model presets for `prewarm --model` and `explain --model`: the attention
// shape of well-known checkpoints, compiled into the binary (no file is read).
#pragma once
#include <string>
#include <vector>

#include "attnjit/types.hpp"
#include "ops/operator.hpp"

namespace attnjit::cli {

struct ModelPreset {
  const char* name;
  int num_qo_heads;
  int num_kv_heads;
  int head_dim;
  DType dtype;            // the checkpoint's own dtype (informational; prewarm covers f16 and bf16)
  float logits_soft_cap;  // 0: none
  const char* source;     // where the numbers come from (HF config.json fields)
};

const std::vector<ModelPreset>& model_presets();
// Throws Error(InvalidArgument) listing every known name when `name` is unknown.
const ModelPreset& find_preset(const std::string& name);
std::string preset_names();  // "llama-3.1-8b, llama-3.1-70b, ..."

// The attention shape every operator turns into the problems a deployment hits.
ops::ModelShape model_shape(const ModelPreset& m);

}  // namespace attnjit::cli

// Model presets for `prewarm --model` and `explain --model`: the attention
// shape of well-known checkpoints, compiled into the binary (no file is read).
#pragma once
#include <string>
#include <vector>

#include "attnjit/single_decode.hpp"
#include "attnjit/types.hpp"

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

// The single-decode problems a deployment of the model can hit (kv_len 1: the
// kernel set does not depend on it): q in {bfloat16, float16}; KV in q's dtype,
// float8_e4m3fn or float8_e5m2; positional encoding NONE or ROPE_LLAMA; the
// model's soft cap.
std::vector<SingleDecodeProblem> decode_problems(const ModelPreset& m);

}  // namespace attnjit::cli

#include "presets.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"

namespace attnjit::cli {

const std::vector<ModelPreset>& model_presets() {
  // num_attention_heads / num_key_value_heads / head_dim (hidden_size /
  // num_attention_heads where config.json has no head_dim).
  static const std::vector<ModelPreset> presets = {
      {"llama-3.1-8b", 32, 8, 128, DType::BF16, 0.f, "meta-llama/Llama-3.1-8B"},
      {"llama-3.1-70b", 64, 8, 128, DType::BF16, 0.f, "meta-llama/Llama-3.1-70B"},
      {"llama-3.2-1b", 32, 8, 64, DType::BF16, 0.f, "meta-llama/Llama-3.2-1B"},
      {"mistral-7b", 32, 8, 128, DType::BF16, 0.f, "mistralai/Mistral-7B-v0.3"},
      {"qwen2.5-7b", 28, 4, 128, DType::BF16, 0.f, "Qwen/Qwen2.5-7B"},
      {"gemma-2-9b", 16, 8, 256, DType::BF16, 50.f, "google/gemma-2-9b (attn_logit_softcapping 50)"},
      {"gemma-2-27b", 32, 16, 128, DType::BF16, 50.f, "google/gemma-2-27b (attn_logit_softcapping 50)"},
      {"tinyllama-1.1b", 32, 4, 64, DType::BF16, 0.f, "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T"},
  };
  return presets;
}

std::string preset_names() {
  std::vector<std::string> names;
  for (const auto& p : model_presets()) names.emplace_back(p.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

const ModelPreset& find_preset(const std::string& name) {
  for (const auto& p : model_presets())
    if (name == p.name) return p;
  throw Error(Status::InvalidArgument,
              fmt::format("--model='{}' is not a known model; known: {} (see `attnjit prewarm --list-models`)", name,
                          preset_names()));
}

ops::ModelShape model_shape(const ModelPreset& m) {
  return {m.num_qo_heads, m.num_kv_heads, m.head_dim, m.logits_soft_cap};
}

}  // namespace attnjit::cli

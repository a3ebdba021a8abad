// The prefill family: many query tokens per request against its KV on tensor
// cores (kernels/prefill.cuh), one skeleton for every KV layout: the KV source
// (contiguous for single prefill, ragged, paged) is part of the spec.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "spec/variant_spec.hpp"

namespace attnjit {

enum class KVSource : uint8_t { Contiguous, Ragged, Paged };
const char* to_string(KVSource s) noexcept;  // "contiguous" / "ragged" / "paged"

struct PrefillKernel {
  static constexpr const char* kFamily = "prefill";

  VariantSpec variant;                       // mask: none / causal / custom
  int head_dim = 128;
  int frags_m = 1;                           // 16-row MMA fragments per warp: a CTA tile of 64 * frags_m query rows
  int stages = 2;                            // cp.async ring depth for K/V tiles
  int min_ctas_per_sm = 1;                   // __launch_bounds__' minimum: caps registers so that many fit
  bool window = false;                       // checks window_left per row (a run-time value)
  KVSource kv_source = KVSource::Contiguous;

  const char* template_name() const { return "prefill.cu.in"; }
  const char* entry_name() const { return "attnjit_prefill"; }
  std::string name() const;  // "prefill_d128_m1_s2_bf16_bf16_bf16_none_causal_contiguous"
  int threads() const { return 128; }
  int tile_q() const;        // query rows (packed with the group's heads) per CTA
  int tile_kv() const;       // KV rows per pipeline stage
  int dynamic_smem_bytes() const;
  nlohmann::json to_json() const;
  static PrefillKernel from_json(const nlohmann::json& j);
  std::vector<std::pair<std::string, std::string>> template_values() const;
  void validate() const;

  bool operator==(const PrefillKernel& o) const {
    return variant == o.variant && head_dim == o.head_dim && frags_m == o.frags_m && stages == o.stages &&
           min_ctas_per_sm == o.min_ctas_per_sm && window == o.window && kv_source == o.kv_source;
  }
};

}  // namespace attnjit

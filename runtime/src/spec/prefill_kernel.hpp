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

// The skeleton, by FlashInfer's backend names: "fa2" is mma.sync on every
// arch from sm_80 (kernels/prefill.cuh), "fa3" Hopper's warpgroup MMA
// (kernels/prefill_sm90.cuh), sm_90a only.
enum class PrefillBackend : uint8_t { Fa2, Fa3 };
const char* to_string(PrefillBackend b) noexcept;  // "fa2" / "fa3"

struct PrefillKernel {
  static constexpr const char* kFamily = "prefill";

  VariantSpec variant;                       // mask: none / causal / custom
  PrefillBackend backend = PrefillBackend::Fa2;
  int head_dim = 128;
  int frags_m = 1;  // a CTA tile of 64 * frags_m query rows: fa2's 16-row fragments per warp, fa3's warpgroups
  int stages = 2;                            // cp.async ring depth for K/V tiles
  int min_ctas_per_sm = 1;                   // __launch_bounds__' minimum: caps registers so that many fit
  bool window = false;                       // checks window_left per row (a run-time value)
  KVSource kv_source = KVSource::Contiguous;
  // fa3 only: the warp-specialized skeleton (kernels/prefill_sm90_ws.cuh: a
  // TMA / gather producer warpgroup and two consumer warpgroups, 128 query
  // rows); frags_m 2, min_ctas_per_sm 1.
  bool warp_specialized = false;
  // warp_specialized only: persistent CTAs (one per SM) take the items in
  // rounds; the producer runs ahead into the next item (prefill_sm90_ws.cuh).
  bool persistent = false;

  const char* template_name() const {
    if (warp_specialized) return "prefill_sm90_ws.cu.in";
    return backend == PrefillBackend::Fa3 ? "prefill_sm90.cu.in" : "prefill.cu.in";
  }
  const char* entry_name() const { return "attnjit_prefill"; }
  std::string name() const;  // "prefill_d128_m1_s2_bf16_bf16_bf16_none_causal_contiguous", "prefill_fa3_d128_s2_..."
  int threads() const;
  // warp_specialized: keys per tile, from the head dim, variant and source (prefill_ws_params.h).
  int ws_tile_kv() const;
  // fp8 (e4m3) q, K and V: QK^T and PV on fp8 wgmma (warp_specialized only;
  // the prefill_ws_* figures take it as their fp8 flag).
  bool fp8() const { return variant.q_dtype == DType::E4M3; }
  // Whether the generated code compiles and runs for `arch` ("sm_90a"): fa2
  // everywhere, fa3 where wgmma exists (the planner asks the same).
  static bool fa3_runs_on(const std::string& arch) { return arch == "sm_90a"; }
  bool supports_arch(const std::string& arch) const { return backend == PrefillBackend::Fa2 || fa3_runs_on(arch); }
  int tile_q() const;        // query rows (packed with the group's heads) per CTA
  int tile_kv() const;       // KV rows per pipeline stage
  int dynamic_smem_bytes() const;
  nlohmann::json to_json() const;
  static PrefillKernel from_json(const nlohmann::json& j);
  std::vector<std::pair<std::string, std::string>> template_values() const;
  void validate() const;

  bool operator==(const PrefillKernel& o) const {
    return variant == o.variant && backend == o.backend && head_dim == o.head_dim && frags_m == o.frags_m &&
           stages == o.stages && min_ctas_per_sm == o.min_ctas_per_sm && window == o.window &&
           kv_source == o.kv_source && warp_specialized == o.warp_specialized && persistent == o.persistent;
  }
};

}  // namespace attnjit

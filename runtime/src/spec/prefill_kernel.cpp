#include "spec/prefill_kernel.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "enum_names.hpp"
#include "prefill_params.h"
#include "prefill_ws_params.h"
#include "spec/json_fields.hpp"

namespace attnjit {

const char* to_string(KVSource s) noexcept {
  static constexpr EnumName<KVSource> kNames[] = {
      {KVSource::Contiguous, "contiguous"}, {KVSource::Ragged, "ragged"}, {KVSource::Paged, "paged"}};
  return name_in(kNames, s);
}

const char* to_string(PrefillBackend b) noexcept { return b == PrefillBackend::Fa3 ? "fa3" : "fa2"; }

namespace {

PrefillBackend parse_backend(const std::string& s) {
  for (PrefillBackend b : {PrefillBackend::Fa2, PrefillBackend::Fa3})
    if (s == to_string(b)) return b;
  throw Error(Status::InvalidArgument, fmt::format("prefill spec.backend='{}' is not a backend; allowed: fa2, fa3", s));
}

KVSource parse_kv_source(const std::string& s) {
  for (KVSource k : {KVSource::Contiguous, KVSource::Ragged, KVSource::Paged})
    if (s == to_string(k)) return k;
  throw Error(Status::InvalidArgument,
              fmt::format("prefill spec.kv_source='{}' is not a KV source; allowed: contiguous, ragged, paged", s));
}

// The device type each source names (kernels/kv_source.cuh).
const char* device_source(KVSource s) {
  switch (s) {
    case KVSource::Contiguous: return "ContiguousKV";
    case KVSource::Ragged: return "RaggedKV";
    case KVSource::Paged: return "PagedKV";
  }
  return "?";
}

}  // namespace

std::string PrefillKernel::name() const {
  if (warp_specialized)
    return fmt::format("prefill_fa3ws_d{}_s{}{}_{}{}_{}", head_dim, stages, persistent ? "_persistent" : "",
                       variant.name(), window ? "_window" : "", to_string(kv_source));
  if (backend == PrefillBackend::Fa3)
    return fmt::format("prefill_fa3_d{}_w{}_s{}{}_{}{}_{}", head_dim, frags_m, stages,
                       min_ctas_per_sm > 1 ? fmt::format("_c{}", min_ctas_per_sm) : "", variant.name(),
                       window ? "_window" : "", to_string(kv_source));
  return fmt::format("prefill_d{}_m{}_s{}{}_{}{}_{}", head_dim, frags_m, stages,
                     min_ctas_per_sm > 1 ? fmt::format("_c{}", min_ctas_per_sm) : "", variant.name(),
                     window ? "_window" : "", to_string(kv_source));
}

int PrefillKernel::ws_tile_kv() const {
  // The device's mode numbers; only none / causal / other and none / other matter here.
  const int mask = variant.mask == MaskMode::None     ? kernels::kMaskNone
                   : variant.mask == MaskMode::Causal ? kernels::kMaskCausal
                                                      : kernels::kMaskCustom;
  const int pos = variant.pos_encoding == PosEncoding::None ? kernels::kPosNone : kernels::kPosAlibi;
  return kernels::prefill_ws_tile_kv(head_dim, mask, window, variant.soft_cap, pos, kv_source != KVSource::Paged,
                                     fp8());
}

int PrefillKernel::threads() const {
  if (warp_specialized) return kernels::prefill_ws_threads();
  return backend == PrefillBackend::Fa3 ? 128 * frags_m : 128;
}

int PrefillKernel::tile_q() const {
  if (warp_specialized) return kernels::prefill_ws_tile_q();
  return backend == PrefillBackend::Fa3 ? kernels::prefill_sm90_tile_q(frags_m) : kernels::prefill_tile_q(frags_m);
}
int PrefillKernel::tile_kv() const {
  if (warp_specialized) return ws_tile_kv();
  return backend == PrefillBackend::Fa3 ? kernels::prefill_sm90_tile_kv(head_dim, min_ctas_per_sm)
                                        : kernels::prefill_tile_kv(head_dim, stages);
}
int PrefillKernel::dynamic_smem_bytes() const {
  if (warp_specialized)
    return kernels::prefill_ws_smem_bytes(
        head_dim, ws_tile_kv(), stages, kernels::prefill_ws_q_buffers(head_dim, ws_tile_kv(), stages, persistent, fp8()),
        fp8());
  return backend == PrefillBackend::Fa3 ? kernels::prefill_sm90_smem_bytes(head_dim, frags_m, stages, min_ctas_per_sm)
                                        : kernels::prefill_smem_bytes(head_dim, frags_m, stages);
}

nlohmann::json PrefillKernel::to_json() const {
  nlohmann::json j = {{"family", kFamily}, {"head_dim", head_dim},  {"frags_m", frags_m},
                      {"stages", stages},  {"window", window},      {"kv_source", to_string(kv_source)}};
  if (min_ctas_per_sm > 1) j["min_ctas_per_sm"] = min_ctas_per_sm;  // absent: 1 (specs written before it)
  if (backend != PrefillBackend::Fa2) j["backend"] = to_string(backend);  // absent: fa2 (the same keys as before)
  if (warp_specialized) j["warp_specialized"] = true;                      // absent: false
  if (persistent) j["persistent"] = true;                                  // absent: false
  variant.to_json(j);
  return j;
}

PrefillKernel PrefillKernel::from_json(const nlohmann::json& j) {
  PrefillKernel s;
  s.variant = VariantSpec::from_json(j);
  s.head_dim = spec_json::int_field(j, "head_dim");
  s.frags_m = spec_json::int_field(j, "frags_m", 1);
  s.stages = spec_json::int_field(j, "stages", 2);
  s.min_ctas_per_sm = spec_json::int_field(j, "min_ctas_per_sm", 1);
  s.window = spec_json::bool_field(j, "window", false);
  s.kv_source = parse_kv_source(spec_json::string_field(j, "kv_source", "contiguous"));
  s.backend = parse_backend(spec_json::string_field(j, "backend", "fa2"));
  s.warp_specialized = spec_json::bool_field(j, "warp_specialized", false);
  s.persistent = spec_json::bool_field(j, "persistent", false);
  s.validate();
  return s;
}

std::vector<std::pair<std::string, std::string>> PrefillKernel::template_values() const {
  auto v = variant.template_values(true);
  v.insert(v.end(), {{"HEAD_DIM", std::to_string(head_dim)},
                     {"STAGES", std::to_string(stages)},
                     {"WINDOW", window ? "true" : "false"},
                     {"KV_SOURCE", device_source(kv_source)}});
  if (warp_specialized) {  // its CTA shape is fixed (prefill_ws_params.h)
    v.emplace_back("PERSISTENT", persistent ? "true" : "false");
    return v;
  }
  v.emplace_back("MIN_CTAS_PER_SM", std::to_string(min_ctas_per_sm));
  // 64 query rows a warp's fragment (fa2) or a warpgroup (fa3): either way tile_q = 64 x frags_m.
  v.insert(v.end(), {backend == PrefillBackend::Fa2 ? "FRAGS_M" : "WARP_GROUPS", std::to_string(frags_m)});
  return v;
}

void PrefillKernel::validate() const {
  variant.validate(kFamily);
  auto bad = [](const char* field, int value, const std::string& allowed) {
    throw Error(Status::InvalidArgument,
                fmt::format("prefill spec.{}={} is not supported; allowed: {}", field, value, allowed));
  };
  // fp8 (e4m3) q, K and V: the warp-specialized kernel at head_dim 128, a
  // 16-bit output (VariantSpec::validate: K/V e4m3, o f16 / bf16), no RoPE,
  // ALiBi, soft cap or user variant; contiguous or ragged K/V (TMA).
  if (fp8()) {
    auto bad8 = [](const std::string& field, const std::string& allowed) {
      throw Error(Status::InvalidArgument,
                  fmt::format("prefill spec.{} is not supported with q_dtype=float8_e4m3fn; allowed: {}", field,
                              allowed));
    };
    if (backend != PrefillBackend::Fa3 || !warp_specialized)
      bad8(fmt::format("backend={}{}", to_string(backend), warp_specialized ? "" : " (warp_specialized=false)"),
           "fa3 with warp_specialized=true");
    if (head_dim != 128) bad8(fmt::format("head_dim={}", head_dim), "128");
    if (variant.pos_encoding != PosEncoding::None)
      bad8(fmt::format("pos_encoding={}", to_string(variant.pos_encoding)), "NONE");
    if (variant.soft_cap) bad8("soft_cap=true", "false");
    if (variant.user) bad8("user (a user variant)", "none");
    if (kv_source == KVSource::Paged) bad8("kv_source=paged", "contiguous, ragged");
  } else if (variant.o_dtype != variant.q_dtype) {
    throw Error(Status::InvalidArgument, fmt::format("prefill spec.o_dtype={} must equal q_dtype={}",
                                                     to_string(variant.o_dtype), to_string(variant.q_dtype)));
  }
  if (variant.mask == MaskMode::Draft)
    throw Error(Status::InvalidArgument,
                "prefill spec.mask=draft is not supported; allowed: none, causal, custom (the draft-tree mask is "
                "speculative decoding's, in the decode family)");
  if (head_dim != 64 && head_dim != 128 && head_dim != 256 && head_dim != 512)
    bad("head_dim", head_dim, backend == PrefillBackend::Fa3 ? "64, 128, 256" : "64, 128, 256, 512");
  if (frags_m != 1 && frags_m != 2) bad("frags_m", frags_m, "1, 2");
  // 256-wide heads (and 512's 256-wide O slices): two fragments' O would need
  // 256 accumulator registers per thread.
  if (backend == PrefillBackend::Fa2 && head_dim >= 256 && frags_m != 1)
    bad("frags_m", frags_m, fmt::format("1 for head_dim {}", head_dim));
  if (stages < 1 || stages > 4) bad("stages", stages, "1 (one K and one V buffer) to 4");
  // 512-wide heads: one stage of 32 keys (Q alone is 66,560 B of shared memory).
  if (backend == PrefillBackend::Fa2 && head_dim == 512 && stages != 1) bad("stages", stages, "1 for head_dim 512");
  if (min_ctas_per_sm < 1 || min_ctas_per_sm > 4) bad("min_ctas_per_sm", min_ctas_per_sm, "1 to 4");
  if (backend == PrefillBackend::Fa3) {
    if (head_dim == 512) bad("head_dim", head_dim, "64, 128, 256 with backend fa3 (512 takes fa2)");
    if (dtype_size(variant.kv_dtype) != 2 && !fp8())
      throw Error(Status::InvalidArgument,
                  fmt::format("prefill spec.kv_dtype={} is not supported by backend fa3; allowed: f16, bf16 (fp8 K/V "
                              "takes fa2)",
                              to_string(variant.kv_dtype)));
    if (stages < 2 || stages > 4) bad("stages", stages, "2 to 4 with backend fa3");
    if (min_ctas_per_sm > 2) bad("min_ctas_per_sm", min_ctas_per_sm, "1 or 2 with backend fa3");
  }
  if (persistent && !warp_specialized)
    throw Error(Status::InvalidArgument,
                "prefill spec.persistent=true needs warp_specialized=true; allowed otherwise: false");
  if (warp_specialized) {
    if (backend != PrefillBackend::Fa3)
      throw Error(Status::InvalidArgument, "prefill spec.warp_specialized=true needs backend fa3; allowed with fa2: false");
    if (frags_m != 2) bad("frags_m", frags_m, "2 with warp_specialized (two consumer warpgroups)");
    if (stages != 2) bad("stages", stages, "2 with warp_specialized");
    if (min_ctas_per_sm != 1) bad("min_ctas_per_sm", min_ctas_per_sm, "1 with warp_specialized");
    if (variant.pos_encoding == PosEncoding::RopeLlama && head_dim > 128)
      bad("head_dim", head_dim, "64, 128 with warp_specialized and pos_encoding rope_llama");
  }
}

}  // namespace attnjit

#include "spec/decode_kernel.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "decode_params.h"
#include "enum_names.hpp"
#include "spec/json_fields.hpp"
#include "spec/spec_field_error.hpp"

namespace attnjit {

namespace {

// The device type of each source (kernels/kv_source.cuh).
const char* source_type(KVSourceKind k) {
  switch (k) {
    case KVSourceKind::Contiguous: return "ContiguousKV";
    case KVSourceKind::Paged: return "PagedKV";
    case KVSourceKind::BlockTable: return "BlockTableKV";
  }
  return "?";
}

KVSourceKind parse_source(const std::string& s) {
  for (auto k : {KVSourceKind::Contiguous, KVSourceKind::Paged, KVSourceKind::BlockTable})
    if (s == to_string(k)) return k;
  throw Error(Status::InvalidArgument,
              fmt::format("decode spec.kv_source='{}' is not supported; allowed: contiguous, paged, block_table", s));
}

}  // namespace

const char* to_string(KVSourceKind k) noexcept {
  static constexpr EnumName<KVSourceKind> kNames[] = {
      {KVSourceKind::Contiguous, "contiguous"}, {KVSourceKind::Paged, "paged"},
      {KVSourceKind::BlockTable, "block_table"}};
  return name_in(kNames, k);
}

const char* DecodeKernel::template_name() const {
  // CUDA cores with a mask: several query tokens per request (one-token specs keep their template and TU).
  return tensor_cores ? "single_decode_tc.cu.in"
         : variant.mask != MaskMode::None ? "single_decode_rows.cu.in"
                                          : "single_decode.cu.in";
}

std::string DecodeKernel::name() const {
  std::string tile = tensor_cores ? fmt::format("w{}_tc", warps) : fmt::format("w{}_u{}", warps, unroll);
  if (tokens_per_cta > 1) tile += fmt::format("_t{}", tokens_per_cta);
  const char* source = kv_source == KVSourceKind::Paged        ? "_paged"
                       : kv_source == KVSourceKind::BlockTable ? "_blocktable"
                                                               : "";
  return fmt::format("decode_d{}_g{}_{}_{}{}", head_dim, heads_per_cta, variant.name(), tile, source);
}

int DecodeKernel::dynamic_smem_bytes() const {
  // Tensor cores: the 16-row Q tile holds any heads x tokens <= 16; with RoPE
  // the rotated Q and K also keep their rests (decode_mma.cuh: kSplitQK).
  return tensor_cores ? kernels::decode_mma_smem_bytes(warps, head_dim, variant.pos_encoding == PosEncoding::RopeLlama)
                      : kernels::decode_smem_bytes(warps, heads_per_cta * tokens_per_cta, head_dim);
}

nlohmann::json DecodeKernel::to_json() const {
  nlohmann::json j = {{"family", kFamily}, {"head_dim", head_dim}, {"heads_per_cta", heads_per_cta}, {"warps", warps}};
  variant.to_json(j);
  j["kv_source"] = to_string(kv_source);
  // Only when > 1: the identities (and names) of one-token specs stay as they were.
  if (tokens_per_cta != 1) j["tokens_per_cta"] = tokens_per_cta;
  if (tensor_cores) j["tensor_cores"] = true;
  else j["unroll"] = unroll;
  return j;
}

DecodeKernel DecodeKernel::from_json(const nlohmann::json& j) {
  DecodeKernel s;
  s.variant = VariantSpec::from_json(j);
  s.head_dim = spec_json::int_field(j, "head_dim");
  s.heads_per_cta = spec_json::int_field(j, "heads_per_cta");
  s.tokens_per_cta = spec_json::int_field(j, "tokens_per_cta", 1);
  s.warps = spec_json::int_field(j, "warps", 4);
  s.tensor_cores = spec_json::bool_field(j, "tensor_cores", false);
  s.unroll = s.tensor_cores ? 4 : spec_json::int_field(j, "unroll", 4);
  s.kv_source = parse_source(spec_json::string_field(j, "kv_source", "contiguous"));
  s.validate();
  return s;
}

std::vector<std::pair<std::string, std::string>> DecodeKernel::template_values() const {
  const bool rows = tensor_cores || variant.mask != MaskMode::None;  // the templates with a mask and tokens
  auto v = variant.template_values(rows);  // the one-token CUDA-core template takes no mask
  v.insert(v.end(), {{"HEAD_DIM", std::to_string(head_dim)},
                     {"HEADS_PER_CTA", std::to_string(heads_per_cta)},
                     {"WARPS", std::to_string(warps)},
                     {"KV_SOURCE", source_type(kv_source)}});
  if (rows) v.emplace_back("TOKENS_PER_CTA", std::to_string(tokens_per_cta));
  if (!tensor_cores) v.emplace_back("UNROLL", std::to_string(unroll));
  return v;
}

void DecodeKernel::validate() const {
  variant.validate(kFamily);
  auto bad = [](const char* field, int value, const char* allowed) {
    unsupported_spec_field("decode", field, value, allowed);
  };
  // A CTA's query rows (heads x tokens) against what one CTA of its skeleton holds.
  auto check_rows = [&](int most, const char* skeleton, const char* why) {
    if (heads_per_cta * tokens_per_cta > most)
      throw Error(Status::InvalidArgument,
                  fmt::format("decode spec.heads_per_cta={} x tokens_per_cta={} = {} query rows is not supported{}; "
                              "allowed: at most {}{}",
                              heads_per_cta, tokens_per_cta, heads_per_cta * tokens_per_cta, skeleton, most, why));
  };
  // One query token is the last position and sees every key (the window is
  // a run-time value); several (speculative decoding) are causal among
  // themselves, or follow TensorRT-LLM's draft-tree mask.
  if (variant.mask == MaskMode::Custom)
    throw Error(Status::InvalidArgument,
                "decode spec.mask=custom is not supported; allowed: none, causal or draft (several query tokens per "
                "request)");
  if (tokens_per_cta < 1 || tokens_per_cta > 16) bad("tokens_per_cta", tokens_per_cta, "1 to 16");
  if (tokens_per_cta > 1 && variant.mask == MaskMode::None)
    throw Error(Status::InvalidArgument,
                fmt::format("decode spec.tokens_per_cta={} needs mask=causal or draft (several query tokens of a "
                            "request), got mask=none",
                            tokens_per_cta));
  if (tensor_cores) {
    if (head_dim != 64 && head_dim != 128) bad("head_dim", head_dim, "64, 128 (tensor cores)");
    if (heads_per_cta < 1 || heads_per_cta > 16) bad("heads_per_cta", heads_per_cta, "1 to 16 (tensor cores)");
    // The CTA's query rows are the MMA's 16 M rows; more would need a second
    // set of Q and O fragments (~100 registers at head_dim 128, past the
    // 255 a thread has): the planner splits them across sibling CTAs instead.
    check_rows(16, "", " (one tensor-core M tile)");
  } else {
    if (head_dim != 64 && head_dim != 128 && head_dim != 256 && head_dim != 512)
      bad("head_dim", head_dim, "64, 128, 256, 512");
    if (heads_per_cta < 1 || heads_per_cta > 8) bad("heads_per_cta", heads_per_cta, "1 to 8");
    // A CTA's rows each hold their q and state in registers (kernels/decode.cuh).
    check_rows(8, " on CUDA cores", "");
    if (unroll < 1 || unroll > 8) bad("unroll", unroll, "1 to 8");
  }
  if (warps != 4) bad("warps", warps, "4");
}

}  // namespace attnjit

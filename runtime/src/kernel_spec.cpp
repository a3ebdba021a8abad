#include "kernel_spec.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <optional>

#include "attnjit/error.hpp"
#include "decode_params.h"

namespace attnjit {

namespace {

// Names of the device-side dtype tags in kernels/numeric.cuh.
const char* device_type(DType t) {
  switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::E4M3: return "e4m3";
    case DType::E5M2: return "e5m2";
  }
  return "?";
}

int pos_mode_value(PosEncoding p) {
  switch (p) {
    case PosEncoding::None: return kernels::kPosNone;
    case PosEncoding::RopeLlama: return kernels::kPosRopeLlama;
    case PosEncoding::Alibi: return kernels::kPosAlibi;
  }
  return -1;
}

// An integer field; nlohmann's get<int>() would convert 1e30 or 2.5 (undefined
// behaviour for out-of-range doubles: found by tools/fuzz/fuzz_kernel_spec).
int int_field(const nlohmann::json& j, const char* key, std::optional<int> fallback = std::nullopt) {
  if (!j.contains(key) && fallback) return *fallback;
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
    throw Error(Status::InvalidArgument, fmt::format("spec.{}={} is not allowed; it must be an integer", key, v.dump()));
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

const char* to_string(KernelOp op) noexcept {
  return op == KernelOp::SingleDecode ? "single_decode" : "merge_states";
}

const char* KernelSpec::template_name() const {
  if (op == KernelOp::MergeStates) return "merge_states.cu.in";
  return tensor_cores ? "single_decode_tc.cu.in" : "single_decode.cu.in";
}

const char* KernelSpec::entry_name() const {
  return op == KernelOp::SingleDecode ? "attnjit_single_decode" : "attnjit_merge_states";
}

int KernelSpec::dynamic_smem_bytes() const {
  if (op == KernelOp::MergeStates) return 0;
  return tensor_cores ? kernels::decode_mma_smem_bytes(warps, head_dim)
                      : kernels::decode_smem_bytes(warps, heads_per_cta, head_dim);
}

std::string KernelSpec::name() const {
  if (op == KernelOp::MergeStates) return fmt::format("merge_states_d{}_{}_w{}", head_dim, device_type(o_dtype), warps);
  std::string pos = pos_encoding == PosEncoding::None ? "none" : pos_encoding == PosEncoding::RopeLlama ? "rope" : "alibi";
  const std::string tile = tensor_cores ? fmt::format("w{}_tc", warps) : fmt::format("w{}_u{}", warps, unroll);
  return fmt::format("single_decode_d{}_g{}_{}_{}_{}_{}{}_{}", head_dim, heads_per_cta, device_type(q_dtype),
                     device_type(kv_dtype), device_type(o_dtype), pos, soft_cap ? "_softcap" : "", tile);
}

nlohmann::json KernelSpec::to_json() const {
  nlohmann::json j = {{"op", to_string(op)}, {"head_dim", head_dim}, {"o_dtype", to_string(o_dtype)}, {"warps", warps}};
  if (op == KernelOp::SingleDecode) {
    j["q_dtype"] = to_string(q_dtype);
    j["kv_dtype"] = to_string(kv_dtype);
    j["pos_encoding"] = to_string(pos_encoding);
    j["soft_cap"] = soft_cap;
    j["heads_per_cta"] = heads_per_cta;
    if (tensor_cores) j["tensor_cores"] = true;
    else j["unroll"] = unroll;
  }
  return j;
}

KernelSpec KernelSpec::from_json(const nlohmann::json& j) {
  try {
    KernelSpec s;
    const std::string op = j.at("op").get<std::string>();
    if (op == "single_decode") s.op = KernelOp::SingleDecode;
    else if (op == "merge_states") s.op = KernelOp::MergeStates;
    else throw Error(Status::InvalidArgument, fmt::format("spec.op='{}' is not a kernel; allowed: single_decode, merge_states", op));
    s.head_dim = int_field(j, "head_dim");
    s.o_dtype = parse_dtype(j.at("o_dtype").get<std::string>(), "spec.o_dtype");
    s.warps = int_field(j, "warps", 4);
    if (s.op == KernelOp::SingleDecode) {
      s.q_dtype = parse_dtype(j.at("q_dtype").get<std::string>(), "spec.q_dtype");
      s.kv_dtype = parse_dtype(j.at("kv_dtype").get<std::string>(), "spec.kv_dtype");
      s.pos_encoding = parse_pos_encoding(j.value("pos_encoding", "NONE"), "spec.pos_encoding");
      s.soft_cap = j.value("soft_cap", false);
      s.heads_per_cta = int_field(j, "heads_per_cta");
      s.tensor_cores = j.value("tensor_cores", false);
      s.unroll = s.tensor_cores ? 4 : int_field(j, "unroll", 4);
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw Error(Status::InvalidArgument, fmt::format("kernel spec JSON is malformed: {} (in {})", e.what(), j.dump()));
  }
}

std::vector<std::pair<std::string, std::string>> KernelSpec::template_values() const {
  std::vector<std::pair<std::string, std::string>> v = {
      {"NAME", name()},
      {"SPEC_JSON", to_json().dump()},
      {"HEAD_DIM", std::to_string(head_dim)},
      {"O_TYPE", device_type(o_dtype)},
      {"WARPS", std::to_string(warps)},
  };
  if (op == KernelOp::SingleDecode) {
    v.insert(v.end(), {{"HEADS_PER_CTA", std::to_string(heads_per_cta)},
                       {"Q_TYPE", device_type(q_dtype)},
                       {"KV_TYPE", device_type(kv_dtype)},
                       {"POS_MODE", std::to_string(pos_mode_value(pos_encoding))},
                       {"SOFT_CAP", soft_cap ? "true" : "false"}});
    if (!tensor_cores) v.emplace_back("UNROLL", std::to_string(unroll));
  }
  return v;
}

}  // namespace attnjit

// KernelSpec: everything that changes generated code, normalized. Two
// problems that differ only in run-time values (lengths, pointers, scales)
// map to the same spec and so the same cubin.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "attnjit/types.hpp"

namespace attnjit {

enum class KernelOp : uint8_t { SingleDecode, MergeStates };
const char* to_string(KernelOp op) noexcept;

struct KernelSpec {
  KernelOp op = KernelOp::SingleDecode;
  int head_dim = 128;
  DType q_dtype = DType::F16;   // decode only
  DType kv_dtype = DType::F16;  // decode only
  DType o_dtype = DType::F16;
  PosEncoding pos_encoding = PosEncoding::None;  // decode only
  bool soft_cap = false;                         // decode only
  int heads_per_cta = 1;                         // decode: query heads sharing a KV head per CTA
  int warps = 4;
  int unroll = 4;                                // decode (CUDA cores): rows in flight per lane group
  bool tensor_cores = false;                     // decode: the mma.m16n8k16 skeleton (decode_mma.cuh)

  // Where the generated source comes from, and the one extern "C" entry in it.
  const char* template_name() const;
  const char* entry_name() const;
  int threads() const { return warps * 32; }
  int dynamic_smem_bytes() const;

  // Readable, unique for distinct specs: "single_decode_d128_g4_bf16_bf16_bf16_none_w4_u4".
  std::string name() const;
  nlohmann::json to_json() const;
  static KernelSpec from_json(const nlohmann::json& j);  // throws Error(InvalidArgument)
  // Values substituted into the template's {{PLACEHOLDERS}}.
  std::vector<std::pair<std::string, std::string>> template_values() const;

  bool operator==(const KernelSpec& o) const { return to_json() == o.to_json(); }
};

}  // namespace attnjit

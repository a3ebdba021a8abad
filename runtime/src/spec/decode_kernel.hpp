// The decode family: one query token per head (and request) against a KV
// sequence, on CUDA cores (kernels/decode.cuh) or tensor cores
// (kernels/decode_mma.cuh, key-major: the query-head group as the MMA's N dimension).
// Speculative decoding (several query tokens per request, causal among
// themselves) is the tensor-core skeleton with variant.mask = causal and
// tokens_per_cta x heads_per_cta rows (kernels/decode_queries.cuh); the
// number of tokens itself is a run-time value.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "spec/variant_spec.hpp"

namespace attnjit {

// Where the kernel finds K and V (kernels/kv_source.cuh): one sequence
// (single decode), FlashInfer's indptr/indices/last_page_len, or block tables
// with per-request lengths (TensorRT-LLM, cuDNN, vLLM). Part of the kernel's
// identity: the addressing is compiled in.
enum class KVSourceKind : uint8_t { Contiguous, Paged, BlockTable };
const char* to_string(KVSourceKind k) noexcept;  // "contiguous" / "paged" / "block_table"

struct DecodeKernel {
  static constexpr const char* kFamily = "decode";

  VariantSpec variant;
  int head_dim = 128;
  int heads_per_cta = 1;      // query heads sharing one KV head in a CTA
  int tokens_per_cta = 1;     // query tokens of one request in a CTA (tensor cores, mask causal: > 1 allowed)
  int warps = 4;
  int unroll = 4;             // CUDA cores: rows in flight per lane group (unused on tensor cores)
  bool tensor_cores = false;  // the mma.m16n8k16 skeleton
  KVSourceKind kv_source = KVSourceKind::Contiguous;

  const char* template_name() const;
  const char* entry_name() const { return "attnjit_single_decode"; }
  std::string name() const;  // "decode_d128_g4_bf16_bf16_bf16_none_w4_tc" (+ "_t2" tokens, "_paged" / "_blocktable")
  int threads() const { return warps * 32; }
  bool supports_arch(const std::string& /*arch*/) const { return true; }  // every known arch
  int dynamic_smem_bytes() const;
  nlohmann::json to_json() const;
  static DecodeKernel from_json(const nlohmann::json& j);
  std::vector<std::pair<std::string, std::string>> template_values() const;
  // Every field within what the templates compile; throws Error(InvalidArgument) naming it.
  void validate() const;

  bool operator==(const DecodeKernel& o) const {
    return variant == o.variant && head_dim == o.head_dim && heads_per_cta == o.heads_per_cta &&
           tokens_per_cta == o.tokens_per_cta && warps == o.warps && unroll == o.unroll &&
           tensor_cores == o.tensor_cores && kv_source == o.kv_source;
  }
};

}  // namespace attnjit

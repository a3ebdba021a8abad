// Double-precision reference for single decode, written from the definition
// (FlashInfer's semantics), independent of the kernels' structure.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "attnjit/single_decode.hpp"

namespace attnjit::test {

struct DecodeReference {
  std::vector<double> o;    // [num_qo_heads, head_dim]
  std::vector<double> lse;  // [num_qo_heads], base 2
};

// q [H, D]; k, v dense in the problem's kv_layout; values already dequantized
// from their storage dtype (scales are applied here, from the options).
// sinks: TensorRT-LLM's attention sinks, one logit per qo head (in the units
// of the scaled scores) added to the softmax denominator, e^sink; lse
// includes it.
// q_pos: the query's position in the sequence, default kv_len - 1 (decode).
// Speculative decoding's token t of a request with q_len tokens sits at
// kv_len - q_len + t and sees keys [max(0, q_pos - window_left), q_pos] only
// (causal among the request's tokens); RoPE and ALiBi use q_pos too. A query
// that sees no key (and no sink) gets o = 0 and lse = -inf.
DecodeReference reference_single_decode(const SingleDecodeProblem& p, const std::vector<double>& q,
                                        const std::vector<double>& k, const std::vector<double>& v,
                                        const std::vector<double>* sinks = nullptr,
                                        std::optional<int64_t> q_pos = std::nullopt);

}  // namespace attnjit::test

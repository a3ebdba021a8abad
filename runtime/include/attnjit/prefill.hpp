// single_prefill_with_kv_cache: many query tokens of one request against its
// KV cache, on tensor cores (FlashInfer's flashinfer.prefill.single_prefill_with_kv_cache
// and single_prefill_with_kv_cache_return_lse).
//
// Causal attention aligns the queries to the end of the KV: query i of qo_len
// sees KV positions <= kv_len - qo_len + i (append attention).
//
// Two ways to call it, as for decode:
//  * plan/run: SinglePrefillPlan plan(rt, problem); plan.run(...) only launches
//    on the caller's stream (no allocation, synchronization or compilation).
//  * single_prefill_with_kv_cache(rt, ...): plans (memoized) and runs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnjit/runtime.hpp"
#include "attnjit/tensor.hpp"
#include "attnjit/types.hpp"
#include "attnjit/variant.hpp"

namespace attnjit {

struct PrefillOptions {
  bool causal = false;        // ignored when a custom mask is given (FlashInfer's rule)
  bool custom_mask = false;   // a packed custom mask is passed to run()
  KVLayout kv_layout = KVLayout::NHD;
  PosEncoding pos_encoding_mode = PosEncoding::None;
  // FlashInfer's option; only false is accepted (true is refused Unsupported):
  // q.k always accumulates in fp32 on the tensor cores, at the same rate.
  bool allow_fp16_qk_reduction = false;
  int window_left = -1;                         // -1: no sliding window
  std::optional<float> logits_soft_cap;         // unset or 0: no capping
  std::optional<float> sm_scale;                // default 1/sqrt(head_dim)
  std::optional<float> rope_scale, rope_theta;  // default 1 and 1e4
  std::optional<float> k_scale, v_scale;        // fp8 KV calibration; default 1
  // The output's dtype (FlashInfer's o_dtype); unset: q's. fp8 (e4m3) q
  // writes float16 or bfloat16 and needs it set; 16-bit q takes only its own.
  std::optional<DType> o_dtype;
  // "auto": fa3 on sm_90 with 16-bit K/V, else fa2; "fa2": mma.sync (every
  // arch from sm_80); "fa3": Hopper's warpgroup MMA (sm_90a, 16-bit K/V);
  // "fa3_ws": the warp-specialized Hopper kernel, the only one for fp8 q
  // ("auto" takes it there on sm_90a).
  std::string backend = "auto";
  bool return_lse = false;  // lse is base 2: log2(sum exp2(s * log2 e)), as decode's
  // A user variant (attnjit/variant.hpp): its source is compiled into the
  // plan's kernels; a plan's run() reads this object's bound values at each
  // run (rebind between runs; no new plan). A mask_mod is refused with
  // causal=true or a custom mask, and by backend='fa3_ws' ("auto" avoids it).
  std::shared_ptr<const Variant> variant;
};

// fp8 prefill (q, k and v float8_e4m3fn, options.o_dtype float16 or
// bfloat16): the warp-specialized Hopper kernel (sm_90a) at head_dim 128,
// without RoPE, ALiBi, a soft cap or a user variant; causal, a custom mask
// and window_left are allowed. Everything else is refused (Unsupported).
struct SinglePrefillProblem {
  int num_qo_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int64_t qo_len = 0;
  int64_t kv_len = 0;
  DType q_dtype = DType::F16;   // float16, bfloat16, or float8_e4m3fn (then kv_dtype too)
  DType kv_dtype = DType::F16;  // the output's dtype is options.o_dtype (unset: q's)
  int device = 0;
  PrefillOptions options;
};

// A custom mask in FlashInfer's flattened form (row-major [qo_len, kv_len],
// true = attend) packed into bits in FlashInfer's order (packbits with
// bitorder "little": bit i of the mask is bit i % 8 of byte i / 8). Pack on
// the host with this and upload; run() takes the packed device bytes.
ATTNJIT_API std::vector<uint8_t> pack_custom_mask(const std::vector<bool>& mask);
ATTNJIT_API std::vector<uint8_t> pack_custom_mask(const uint8_t* mask, size_t n);

// Device bytes of a packed custom mask (pack_custom_mask's output, uploaded).
struct PackedMask {
  const void* data = nullptr;
  size_t bytes = 0;
};

// fp8 q's per-head dequantization scales (FlashInfer's scale_q, scale_k,
// scale_v): float32 device tensors, scale_q [num_qo_heads], scale_k and
// scale_v [num_kv_heads], contiguous; null: ones. A score is
// (q8 . k8) scale_q[h] scale_k[kv head] sm_scale, the output
// (P v8) scale_v[kv head] v_scale. Refused with 16-bit q.
struct PrefillScales {
  const TensorView* scale_q = nullptr;
  const TensorView* scale_k = nullptr;
  const TensorView* scale_v = nullptr;
};

class ATTNJIT_API SinglePrefillPlan {
 public:
  SinglePrefillPlan(const Runtime& rt, const SinglePrefillProblem& problem);
  ~SinglePrefillPlan();
  SinglePrefillPlan(SinglePrefillPlan&&) noexcept;
  SinglePrefillPlan& operator=(SinglePrefillPlan&&) noexcept;

  const SinglePrefillProblem& problem() const;
  size_t workspace_bytes() const;  // 0 unless the KV is split
  int num_kv_chunks() const;       // KV partitions (1: no merge pass)
  std::string describe() const;

  // q [qo_len, H_qo, D]; k, v [kv_len, H_kv, D] (NHD) or [H_kv, kv_len, D] (HND);
  // o [qo_len, H_qo, D] in the problem's output dtype (options.o_dtype, unset: q's),
  // rows contiguous (stride(0) = H_qo * stride(1));
  // lse [qo_len, H_qo] float32 or null; mask: the packed custom mask when the
  // problem has one (at least ceil(qo_len * kv_len / 8) bytes), else null.
  // variant: the values of a plan made with a variant (the same source, every
  // param bound); null takes problem().options.variant's. scales: fp8 q's
  // per-head scales (PrefillScales), or null (ones).
  void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
           const TensorView* lse, const PackedMask* mask, void* workspace, size_t workspace_bytes,
           Stream stream, const Variant* variant = nullptr, const PrefillScales* scales = nullptr) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The workspace bytes single_prefill_with_kv_cache needs for these tensors
// and options (0: none), from the same memoized plan: a caller that
// allocates it stream-ordered (torch's allocator, cudaMallocAsync) and
// passes it keeps the one-call form capturable in a CUDA graph, which the
// Runtime's own leases are not. has_lse / has_mask as the call will pass them;
// options.o_dtype as o's dtype (unset: q's).
ATTNJIT_API size_t single_prefill_workspace_bytes(const Runtime& rt, const TensorView& q, const TensorView& k,
                                                  const TensorView& v, const PrefillOptions& options, bool has_lse,
                                                  bool has_mask);

// Plans (cached per problem) and runs; a null workspace leases one from the Runtime.
// options.custom_mask is set from `mask`, options.return_lse from `lse`,
// options.o_dtype from o's dtype (fp8 q: o float16 or bfloat16).
ATTNJIT_API void single_prefill_with_kv_cache(const Runtime& rt, const TensorView& q, const TensorView& k,
                                              const TensorView& v, const TensorView& o, const TensorView* lse,
                                              const PrefillOptions& options, Stream stream,
                                              const PackedMask* mask = nullptr, void* workspace = nullptr,
                                              size_t workspace_bytes = 0, const PrefillScales* scales = nullptr);

}  // namespace attnjit

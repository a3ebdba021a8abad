// single_decode_with_kv_cache: one query token per head against one request's
// KV cache (FlashInfer's flashinfer.decode.single_decode_with_kv_cache).
//
// Two ways to call it:
//  * plan/run: SingleDecodePlan plan(rt, problem) compiles or loads every kernel
//    it needs and sizes the workspace; plan.run(...) only launches, on the
//    caller's stream, with no allocation, synchronization or compilation, so it
//    can be captured in a CUDA graph.
//  * single_decode_with_kv_cache(rt, ...): plans (memoized) and runs.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "attnjit/runtime.hpp"
#include "attnjit/tensor.hpp"
#include "attnjit/types.hpp"
#include "attnjit/variant.hpp"

namespace attnjit {

struct SingleDecodeOptions {
  KVLayout kv_layout = KVLayout::NHD;
  PosEncoding pos_encoding_mode = PosEncoding::None;
  bool use_tensor_cores = false;
  std::optional<float> q_scale, k_scale, v_scale;  // fp8 calibration; default 1
  int window_left = -1;                            // -1: the whole sequence
  std::optional<float> logits_soft_cap;            // unset or 0: no capping
  std::optional<float> sm_scale;                   // default 1/sqrt(head_dim)
  std::optional<float> rope_scale, rope_theta;     // default 1 and 1e4
  bool return_lse = false;  // lse is log2(sum exp2(s*log2e)) = natural LSE / ln 2 (FlashInfer's base-2 convention)
  // A user variant (attnjit/variant.hpp), as PrefillOptions::variant: b = 0, q = 0.
  std::shared_ptr<const Variant> variant;
};

struct SingleDecodeProblem {
  int num_qo_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int64_t kv_len = 0;
  DType q_dtype = DType::F16;
  DType kv_dtype = DType::F16;
  int device = 0;
  SingleDecodeOptions options;
};

class ATTNJIT_API SingleDecodePlan {
 public:
  // Validates the problem (Error(InvalidArgument/Unsupported) naming the field)
  // and makes every kernel ready on `problem.device`.
  SingleDecodePlan(const Runtime& rt, const SingleDecodeProblem& problem);
  ~SingleDecodePlan();
  SingleDecodePlan(SingleDecodePlan&&) noexcept;
  SingleDecodePlan& operator=(SingleDecodePlan&&) noexcept;

  const SingleDecodeProblem& problem() const;
  size_t workspace_bytes() const;  // device bytes run() needs (0 when unsplit)
  int num_splits() const;          // KV partitions (1: no merge pass)
  std::string describe() const;    // kernels, grid and split, for `explain` and logs

  // q [H_qo, D]; k, v per kv_layout; o [H_qo, D] in q's dtype; lse [H_qo] float32
  // or nullptr. Inputs must match the planned problem (Error(NotPlanned) otherwise).
  // variant: as SinglePrefillPlan::run's (null: problem().options.variant's values).
  void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
           const TensorView* lse, void* workspace, size_t workspace_bytes, Stream stream,
           const Variant* variant = nullptr) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Plans (cached per problem in the Runtime) and runs. The workspace, if null,
// is the Runtime's own per-device buffer, grown when a plan needs more.
ATTNJIT_API void single_decode_with_kv_cache(const Runtime& rt, const TensorView& q, const TensorView& k,
                                 const TensorView& v, const TensorView& o, const TensorView* lse,
                                 const SingleDecodeOptions& options, Stream stream,
                                 void* workspace = nullptr, size_t workspace_bytes = 0);

}  // namespace attnjit

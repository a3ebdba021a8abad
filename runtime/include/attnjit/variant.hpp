// User-defined attention variants (issue 31): a score_mod and/or a mask_mod
// written as the body of a CUDA device function, compiled by NVRTC into the
// exact kernel and cached by hash like every kernel. The snippets run on the
// GPU with the caller's rights: they are code, not data.
//
//   float score_mod(float s, int b, int h, int q, int kv, const Params& p)
//   bool  mask_mod(int b, int h, int q, int kv, const Params& p)
//
// s: the scaled score sm_scale * q.k in natural-log units (FlexAttention's);
// the result is the logit before softmax. b: the request (0 for single
// calls); h: the query head; q: the query's index among its request's
// queries (0 .. qo_len - 1; decode's one query is 0); kv: the key's index in
// the request's KV sequence (0 .. kv_len - 1).
//
// Params is generated from the declaration, in order: a tensor `x` of rank R
// gives `const T* x; int64_t x_shape[R]; int64_t x_stride[R];` (strides in
// elements) and `x_at(i0, ..)` returning x[i0 * x_stride[0] + ..]; a scalar
// gives `float x;` or `int32_t x;`. f16 and bf16 elements convert to float.
// Values are bound at run time (no recompile): the whole struct travels in the
// kernel's parameters, up to kMaxParamsBytes.
#pragma once
#include <dlpack/dlpack.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnjit/export.h"

namespace attnjit {

// Element types of a declared param. Scalars are F32 or I32 only.
enum class VariantParamType : uint8_t { F16, BF16, F32, I32, U8, I64 };
ATTNJIT_API const char* to_string(VariantParamType t) noexcept;  // "f16", "bf16", "f32", "i32", "u8", "i64"
ATTNJIT_API VariantParamType parse_variant_param_type(std::string_view s, std::string_view arg);

struct VariantParam {
  std::string name;  // a C identifier, unique in the declaration
  VariantParamType type = VariantParamType::F32;
  int rank = 0;      // 0: a scalar; 1..4: a tensor of that rank
  bool operator==(const VariantParam& o) const { return name == o.name && type == o.type && rank == o.rank; }
};

// When a block-sparse variant's tiles are classified (issue 31 item 2).
// EachRun: every run classifies first, into the run's workspace: the classes
// always follow the values of that run (a bind, a tensor param rewritten in
// place), and a captured CUDA graph replays the classification. OnBind: a
// plan keeps the classes it made, one copy per stream, and classifies again
// only when the run's variant was bound (any param, Variant::bind / unbind)
// since that copy was made, as FlexAttention's BlockMask built once and
// reused. Not seen under OnBind: a tensor param rewritten in place without a
// bind (bind it again to have it seen). A run on a capturing stream, or on a
// fifth stream of one plan, classifies as EachRun does (into the workspace),
// so a captured graph replays its own classification and reads no kept copy.
enum class Reclassify : uint8_t { EachRun, OnBind };
ATTNJIT_API const char* to_string(Reclassify r) noexcept;  // "each_run", "on_bind"
ATTNJIT_API Reclassify parse_reclassify(std::string_view s, std::string_view arg);

// What a kernel is compiled from: part of its spec, name and cache key.
struct VariantSource {
  std::string score_mod;  // the body of score_mod; empty: none
  std::string mask_mod;   // the body of mask_mod; empty: none
  std::vector<VariantParam> params;
  // Block sparsity (needs a mask_mod; prefill only): every run first
  // classifies each (query tile, KV tile) of the plan by mask_mod on the GPU
  // as empty (skipped: not loaded, not computed), full (mask_mod not
  // evaluated) or partial, so a kernel visits only the tiles the mask keeps.
  // heads_vary = false is the caller's promise that mask_mod does not read
  // h: one classification serves every KV head (FlexAttention's H=None).
  bool block_sparse = false;
  bool heads_vary = true;
  // A run-time policy (needs block_sparse for OnBind), not compiled: it is
  // in the JSON that builds a variant ("reclassify") but not in the source's
  // identity (its JSON, digest, ==), so both policies share kernels and plans;
  // a run follows the policy of the variant it is given.
  Reclassify reclassify = Reclassify::EachRun;
  bool operator==(const VariantSource& o) const {
    return score_mod == o.score_mod && mask_mod == o.mask_mod && params == o.params &&
           block_sparse == o.block_sparse && heads_vary == o.heads_vary;
  }
};

// A variant and the values bound to its params. The plans that take it read
// the values at each run(), so rebinding between runs changes no kernel. A
// plan keeps a reference: bind from one thread, and not while a run() that
// uses it is being issued.
class ATTNJIT_API Variant {
 public:
  static constexpr size_t kMaxParamsBytes = 256;  // kernels::kUserParamsWords * 8

  // Throws Error(InvalidArgument) naming the field: neither snippet given, a
  // bad or repeated param name, a scalar of a tensor type, a rank outside
  // 0..4, or a declaration larger than kMaxParamsBytes.
  Variant(std::string score_mod, std::string mask_mod, std::vector<VariantParam> params);
  explicit Variant(VariantSource source);

  const VariantSource& source() const { return *source_; }
  std::shared_ptr<const VariantSource> shared_source() const { return source_; }

  // Bind a declared param; each throws Error(InvalidArgument) naming the
  // param when it is not declared, or declared as another kind, type or rank.
  void bind(const std::string& name, const DLTensor* tensor);  // CUDA memory
  void bind(const std::string& name, float value);
  void bind(const std::string& name, int32_t value);
  void unbind(const std::string& name);

  // Changes at every bind / unbind; unique across variants (a copy keeps its
  // original's, as it holds the same values). What a kept block mask is
  // checked against under Reclassify::OnBind.
  uint64_t values_version() const { return values_version_; }

  // The Params struct as the kernels read it, for a run on `device`: throws
  // Error(InvalidArgument) naming the first param not bound, or a tensor on
  // another device. out must hold kMaxParamsBytes.
  void pack(void* out, int device) const;

 private:
  struct Bound {
    bool set = false;
    const void* data = nullptr;
    int device = -1;
    std::array<int64_t, 4> shape{}, strides{};
    float f32 = 0.f;
    int32_t i32 = 0;
  };
  size_t index_of(const std::string& name) const;
  std::shared_ptr<const VariantSource> source_;
  std::vector<Bound> bound_;
  uint64_t values_version_ = 0;
};

}  // namespace attnjit

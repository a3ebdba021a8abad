// What the ragged and paged batch prefill wrappers share: the caller's
// workspace, plan() (validate, plan, load kernels, upload the arrays into the
// workspace's int part on the caller's stream) and the launch of the prefill
// and merge kernels from a filled params struct.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attnjit/batch_prefill.hpp"
#include "engine.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"

namespace attnjit::ops {

struct BatchPrefillCore {
  const Runtime* rt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  KVLayout kv_layout = KVLayout::NHD;
  std::string backend = "auto";
  int device = 0;

  bool planned = false;
  BatchPrefillShape shape;
  BatchPrefillLayout layout;
  std::shared_ptr<detail::Kernel> prefill, merge;
  int64_t nnz_kv = 0;          // ragged: kv_indptr[-1]
  int32_t max_page_index = -1;  // paged: the largest page id the batch reads
  int page_size = 0;

  BatchPrefillCore(const Runtime& r, void* ws, size_t ws_bytes, KVLayout layout_, std::string backend_, int dev);

  // Plans `s` (its options' backend is the wrapper's), then uploads: the work
  // list, qo_indptr, kv_indptr, and (when non-empty) the paged arrays and the
  // packed mask with its per-request byte offsets.
  void plan(BatchPrefillShape s, const std::vector<int32_t>& kv_indptr, const std::vector<int32_t>& page_indices,
            const std::vector<int32_t>& last_page_len, const std::vector<bool>& custom_mask, Stream stream);
  // q, o, lse checked against the plan; params for the kernels (KV left to the caller).
  kernels::PrefillParams params(const TensorView& q, const TensorView& o, const TensorView* lse) const;
  void launch(const kernels::PrefillParams& p, const TensorView& o, Stream stream) const;
  void require_planned(const char* what) const;
  std::string describe() const;
};

}  // namespace attnjit::ops

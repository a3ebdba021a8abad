// The page helpers' problems (attnjit/page.hpp), each made in one place:
// from the call's tensors and tables, from JSON (manifests, `explain`, the
// registry: {"op": "page", "function": ...}) and back; validate is the only
// check of a problem's fields.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <variant>

#include "attnjit/page.hpp"
#include "attnjit/tensor.hpp"
#include "attnjit/types.hpp"

namespace attnjit::ops {

struct PageAppendProblem {
  int64_t nnz = 0;  // appended rows
  int num_kv_heads = 0;
  int head_dim = 0;
  int page_size = 0;
  int64_t num_pages = 0;  // pages of the cache
  int batch_size = 0;
  int64_t num_indices = 0;  // kv_indices' length
  DType kv_dtype = DType::F16;
  KVLayout kv_layout = KVLayout::NHD;
  // The widest access (bytes: 1 to 16, a power of two) that every address,
  // every stride and a row of the four tensors are multiples of, and whether
  // their last dimensions are contiguous: a tensor property, so JSON problems
  // take the ordinary case (16, true).
  int access_bytes = 16;
  bool contiguous_rows = true;
  int device = 0;
};

struct BatchPositionsProblem {
  int batch_size = 0;
  int64_t nnz = 0;
  int device = 0;
};

using PageProblem = std::variant<PageAppendProblem, BatchPositionsProblem>;

// From append_paged_kv_cache's arguments; Error(InvalidArgument) naming the
// tensor or table, its value and what is allowed.
PageAppendProblem page_append_problem_from_tensors(const TensorView& append_key, const TensorView& append_value,
                                                   const PagedKVAppendTable& table, const TensorView& k_cache,
                                                   const TensorView& v_cache, KVLayout kv_layout);
BatchPositionsProblem batch_positions_problem_from_args(const int32_t* append_indptr, const int32_t* seq_lens,
                                                        int batch_size, int64_t nnz, const int32_t* batch_indices,
                                                        const int32_t* positions, int device);

// {"op": "page", "function": "append_paged_kv_cache", "nnz", "num_kv_heads",
// "head_dim", "page_size", "batch_size", "kv_dtype", "kv_layout", ...} or
// {"op": "page", "function": "get_batch_indices_positions", "batch_size",
// "nnz"}. Unknown keys and wrongly typed values are errors naming the key.
PageProblem page_problem_from_json(const nlohmann::json& j);
nlohmann::json to_json(const PageAppendProblem& p);
nlohmann::json to_json(const BatchPositionsProblem& p);

void validate(const PageAppendProblem& p);
void validate(const BatchPositionsProblem& p);

}  // namespace attnjit::ops

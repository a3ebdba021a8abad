// The paged-cache helper family: FlashInfer's append_paged_kv_cache (a copy
// of K/V rows into their pages, kernels/paged_kv_append.cuh) and
// get_batch_indices_positions (kernels/batch_positions.cuh). The append
// moves bytes, so its code depends on the element width alone: one kernel
// serves float16 and bfloat16, one both fp8 formats.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnjit {

struct PageKernel {
  static constexpr const char* kFamily = "page";
  enum class Function : uint8_t { AppendKV, BatchPositions };

  Function function = Function::AppendKV;
  int elem_bytes = 2;  // AppendKV: 1 (fp8) or 2 (16-bit); BatchPositions: 4 (int32), fixed
  int block_threads = 256;  // JSON "threads"

  const char* template_name() const;
  const char* entry_name() const;
  std::string name() const;  // "page_append_kv_e2_t256", "page_batch_positions_t256"
  int threads() const { return block_threads; }
  bool supports_arch(const std::string& /*arch*/) const { return true; }  // every known arch
  int dynamic_smem_bytes() const { return 0; }
  nlohmann::json to_json() const;
  static PageKernel from_json(const nlohmann::json& j);
  std::vector<std::pair<std::string, std::string>> template_values() const;
  void validate() const;

  bool operator==(const PageKernel& o) const {
    return function == o.function && elem_bytes == o.elem_bytes && block_threads == o.block_threads;
  }
};

const char* to_string(PageKernel::Function f) noexcept;  // "append_kv", "batch_positions"

}  // namespace attnjit

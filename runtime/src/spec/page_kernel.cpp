#include "spec/page_kernel.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "invalid_argument.hpp"
#include "spec/json_fields.hpp"

namespace attnjit {

const char* to_string(PageKernel::Function f) noexcept {
  return f == PageKernel::Function::AppendKV ? "append_kv" : "batch_positions";
}

const char* PageKernel::template_name() const {
  return function == Function::AppendKV ? "page_append_kv.cu.in" : "page_batch_positions.cu.in";
}

const char* PageKernel::entry_name() const {
  return function == Function::AppendKV ? "attnjit_page_append_kv" : "attnjit_page_batch_positions";
}

std::string PageKernel::name() const {
  if (function == Function::AppendKV) return fmt::format("page_append_kv_e{}_t{}", elem_bytes, block_threads);
  return fmt::format("page_batch_positions_t{}", block_threads);
}

nlohmann::json PageKernel::to_json() const {
  nlohmann::json j = {{"family", kFamily}, {"kernel", to_string(function)}, {"threads", block_threads}};
  if (function == Function::AppendKV) j["elem_bytes"] = elem_bytes;
  return j;
}

PageKernel PageKernel::from_json(const nlohmann::json& j) {
  PageKernel s;
  const std::string kernel = spec_json::string_field(j, "kernel");
  if (kernel == "append_kv") {
    s.function = Function::AppendKV;
    s.elem_bytes = spec_json::int_field(j, "elem_bytes");
  } else if (kernel == "batch_positions") {
    s.function = Function::BatchPositions;
    s.elem_bytes = 4;
    if (j.contains("elem_bytes"))
      invalid(fmt::format("page spec.elem_bytes={} is not allowed for kernel batch_positions; allowed: absent",
                          j.at("elem_bytes").dump()));
  } else {
    invalid(fmt::format("page spec.kernel='{}' is not a page kernel; allowed: append_kv, batch_positions", kernel));
  }
  s.block_threads = spec_json::int_field(j, "threads", 256);
  for (const auto& [key, value] : j.items())
    if (key != "family" && key != "kernel" && key != "threads" && key != "elem_bytes")
      invalid(fmt::format("page spec.{} is not a field of the page family; allowed: family, kernel, threads, "
                          "elem_bytes",
                          key));
  s.validate();
  return s;
}

std::vector<std::pair<std::string, std::string>> PageKernel::template_values() const {
  if (function == Function::AppendKV)
    return {{"ELEM_BYTES", std::to_string(elem_bytes)}, {"THREADS", std::to_string(block_threads)}};
  return {{"THREADS", std::to_string(block_threads)}};
}

void PageKernel::validate() const {
  if (function == Function::AppendKV && elem_bytes != 1 && elem_bytes != 2)
    invalid(fmt::format("page spec.elem_bytes={} is not supported; allowed: 1 (fp8), 2 (float16, bfloat16)",
                        elem_bytes));
  if (function == Function::BatchPositions && elem_bytes != 4)
    invalid(fmt::format("page spec.elem_bytes={} is not allowed for batch_positions; allowed: 4 (int32)", elem_bytes));
  // Whole warps, a power of two (the append splits a CTA into rows of
  // power-of-two lanes), at most a CTA's 1024 threads.
  if (block_threads < 32 || block_threads > 1024 || (block_threads & (block_threads - 1)) != 0)
    invalid(fmt::format("page spec.threads={} is not supported; allowed: 32, 64, 128, 256, 512, 1024", block_threads));
}

}  // namespace attnjit

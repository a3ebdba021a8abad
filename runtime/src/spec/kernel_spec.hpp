// KernelSpec: everything that changes generated code, normalized, as one of a
// closed set of kernel families. Each family (spec/*_kernel.hpp) provides its
// template, entry name, readable name, JSON round trip, template values and
// shared-memory size; this wrapper only forwards, so no code branches on a
// family tag. Two problems that differ only in run-time values (lengths,
// pointers, scales) map to the same spec and so the same cubin.
//
// Adding a family: write spec/<family>_kernel.{hpp,cpp} and add it to Family.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "spec/block_mask_kernel.hpp"
#include "spec/decode_kernel.hpp"
#include "spec/merge_kernel.hpp"
#include "spec/page_kernel.hpp"
#include "spec/prefill_kernel.hpp"

namespace attnjit {

class KernelSpec {
 public:
  using Family = std::variant<DecodeKernel, MergeKernel, PrefillKernel, PageKernel, BlockMaskKernel>;

  KernelSpec() = default;
  template <class F, class = std::enable_if_t<std::is_constructible_v<Family, F>>>
  KernelSpec(F family) : family_(std::move(family)) {}  // NOLINT: a family spec is a KernelSpec

  const Family& family() const { return family_; }
  template <class F> const F* as() const { return std::get_if<F>(&family_); }

  const char* family_name() const;
  const char* template_name() const;
  const char* entry_name() const;
  std::string name() const;  // readable, unique among distinct specs
  int threads() const;
  int dynamic_smem_bytes() const;
  // Whether the generated code compiles for `arch` (a known arch, "sm_90a");
  // Engine::prepare refuses the others, prewarm skips them.
  bool supports_arch(const std::string& arch) const;
  // {"family": "...", ...}; from_json dispatches on "family" over the closed
  // set and validates every field (Error(InvalidArgument) naming it).
  nlohmann::json to_json() const;
  static KernelSpec from_json(const nlohmann::json& j);
  std::vector<std::pair<std::string, std::string>> template_values() const;  // NAME and SPEC_JSON included
  void validate() const;
  // The registry's identity: the canonical JSON (every field) as text.
  std::string identity() const { return to_json().dump(); }

  bool operator==(const KernelSpec& o) const { return family_ == o.family_; }
  bool operator!=(const KernelSpec& o) const { return !(*this == o); }

 private:
  Family family_;
};

// The largest dynamic shared memory any supported GPU grants one CTA
// (sm_90/sm_100: 227 KiB); validate() refuses a spec that needs more.
inline constexpr int kMaxDynamicSmemBytes = 227 * 1024;

// The family names the closed set knows, for messages: "decode, merge_states".
std::string kernel_family_names();

}  // namespace attnjit

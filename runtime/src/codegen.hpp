// Codegen: a KernelSpec filled into its template from templates/ becomes one
// translation unit, which includes only the embedded headers from kernels/.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "spec/kernel_spec.hpp"

namespace attnjit {

struct TranslationUnit {
  std::string name;    // "<spec name>.cu"
  std::string source;  // the generated text
  std::vector<std::pair<std::string, std::string>> headers;  // every embedded kernels/ header
  // NVRTC options of this unit alone, after the engine's (part of its cache
  // key): a user variant's `/` is the fast division Triton's is (2 ulp), so a
  // snippet's soft cap costs what the built-in's reciprocal multiply does.
  std::vector<std::string> options;
};

// Throws Error(Internal) if a placeholder is left unfilled or a value has no placeholder.
TranslationUnit generate(const KernelSpec& spec);

// Replaces each {{KEY}} in text; throws Error(Internal) naming leftovers.
std::string fill_template(const std::string& text, const std::vector<std::pair<std::string, std::string>>& values,
                          const std::string& template_name);

}  // namespace attnjit

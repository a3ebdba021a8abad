// libFuzzer target: the JSON a manifest feeds in (prewarm --manifest): kernel
// specs (KernelSpec::from_json, then validate(), which must refuse everything
// the templates cannot take) and single-decode problems (the manifest's
// problem form, through single_decode_problem_from_json and the planner). Any input may be refused with attnjit::Error; nothing may
// crash, throw anything else, or pass the checks and then misbehave:
//  * an accepted spec survives to_json/from_json unchanged and renders a name
//    and template values;
//  * every spec the planner makes for an accepted problem passes validate().
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "attnjit/error.hpp"
#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_decode/single_decode_problem.hpp"
#include "spec/kernel_spec.hpp"

namespace {

using json = nlohmann::json;

[[noreturn]] void property_failed(const char* what, const json& j) {
  __builtin_fprintf(stderr, "fuzz_kernel_spec: property violated: %s\ninput: %s\n", what, j.dump().c_str());
  std::abort();
}

void try_spec(const json& j) {
  attnjit::KernelSpec s;
  try {
    s = attnjit::KernelSpec::from_json(j);
    s.validate();
  } catch (const attnjit::Error&) {
    return;  // refused, with a message: fine
  }
  const attnjit::KernelSpec again = attnjit::KernelSpec::from_json(s.to_json());
  if (!(again == s)) property_failed("an accepted spec changed through to_json/from_json", j);
  if (s.name().empty() || s.template_values().empty()) property_failed("an accepted spec renders nothing", j);
}

void try_problem(const json& j) {
  std::vector<attnjit::KernelSpec> specs;
  try {
    const attnjit::SingleDecodeProblem p = attnjit::ops::single_decode_problem_from_json(j);
    specs = attnjit::ops::single_decode_kernels(p);
  } catch (const attnjit::Error&) {
    return;
  }
  for (const auto& s : specs) {
    try {
      s.validate();
    } catch (const attnjit::Error& e) {
      property_failed(e.what(), j);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const json doc = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  // A whole manifest, a list of specs, or one spec or problem.
  auto each = [&](const json& list, auto fn) {
    if (list.is_array())
      for (const auto& item : list) fn(item);
  };
  if (doc.is_object()) {
    if (doc.contains("kernels")) each(doc["kernels"], try_spec);
    if (doc.contains("problems")) each(doc["problems"], try_problem);
    try_spec(doc);
    try_problem(doc);
  }
  each(doc, try_spec);
  return 0;
}

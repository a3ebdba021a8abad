// libFuzzer target: the JSON a manifest feeds in (prewarm --manifest): kernel
// specs (KernelSpec::from_json, then check_kernel_spec, which must refuse
// everything the templates cannot take) and decode problems (the same fields
// prewarm's manifest reader takes, through parse_dtype, parse_pos_encoding and
// the planner). Any input may be refused with attnjit::Error; nothing may
// crash, throw anything else, or pass the checks and then misbehave:
//  * an accepted spec survives to_json/from_json unchanged and renders a name
//    and template values;
//  * every spec the planner makes for an accepted problem passes check_kernel_spec.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "attnjit/error.hpp"
#include "kernel_spec.hpp"
#include "planner/single_decode_planner.hpp"
#include "spec_checks.hpp"

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
    attnjit::check_kernel_spec(s);
  } catch (const attnjit::Error&) {
    return;  // refused, with a message: fine
  }
  const attnjit::KernelSpec again = attnjit::KernelSpec::from_json(s.to_json());
  if (!(again == s)) property_failed("an accepted spec changed through to_json/from_json", j);
  if (s.name().empty() || s.template_values().empty()) property_failed("an accepted spec renders nothing", j);
}

template <typename T>
bool get(const json& j, const char* key, T& out) {
  if (!j.contains(key)) return true;
  const json& v = j.at(key);
  if constexpr (std::is_same_v<T, int>) {
    if (!v.is_number_integer()) return false;
    const auto n = v.get<int64_t>();
    if (n < INT32_MIN || n > INT32_MAX) return false;
    out = static_cast<int>(n);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return false;
    out = v.get<bool>();
  } else if constexpr (std::is_same_v<T, float>) {
    if (!v.is_number()) return false;
    out = v.get<float>();
  } else {
    if (!v.is_string()) return false;
    out = v.get<std::string>();
  }
  return true;
}

void try_problem(const json& j) {
  attnjit::SingleDecodeProblem p;
  p.kv_len = 1;
  std::string q = "bfloat16", kv, pos = "NONE";
  float cap = 0;
  bool tc = false;
  if (!get(j, "num_qo_heads", p.num_qo_heads) || !get(j, "num_kv_heads", p.num_kv_heads) ||
      !get(j, "head_dim", p.head_dim) || !get(j, "q_dtype", q) || !get(j, "kv_dtype", kv) ||
      !get(j, "pos_encoding_mode", pos) || !get(j, "logits_soft_cap", cap) || !get(j, "use_tensor_cores", tc))
    return;
  std::vector<attnjit::KernelSpec> specs;
  try {
    p.q_dtype = attnjit::parse_dtype(q, "q_dtype");
    p.kv_dtype = kv.empty() ? p.q_dtype : attnjit::parse_dtype(kv, "kv_dtype");
    p.options.pos_encoding_mode = attnjit::parse_pos_encoding(pos, "pos_encoding_mode");
    if (j.contains("logits_soft_cap")) p.options.logits_soft_cap = cap;
    p.options.use_tensor_cores = tc;
    specs = attnjit::planner::kernels_for(p);
  } catch (const attnjit::Error&) {
    return;
  }
  for (const auto& s : specs) {
    try {
      attnjit::check_kernel_spec(s);
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

#include "variant_file.hpp"

#include <fmt/format.h>

#include <fstream>
#include <set>
#include <sstream>

#include "attnjit/error.hpp"

namespace attnjit::cli {

nlohmann::json read_variant_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Status::InvalidArgument, fmt::format("--variant {}: cannot be read", path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(Status::InvalidArgument, fmt::format("--variant {}: not JSON ({})", path, e.what()));
  }
  if (!j.is_object())
    throw Error(Status::InvalidArgument,
                fmt::format("--variant {}: expected an object {{\"score_mod\": str, \"mask_mod\": str, \"params\": "
                            "[...]}}, got {}",
                            path, j.type_name()));
  return j;
}

bool add_variant(nlohmann::json& problem, const nlohmann::json& variant) {
  static const std::set<std::string> takes = {"single_decode", "batch_decode", "single_prefill", "batch_prefill"};
  const std::string op = problem.value("op", "single_decode");
  if (!takes.count(op)) return false;
  problem["variant"] = variant;
  const bool mask_mod = variant.contains("mask_mod") && variant["mask_mod"].is_string() &&
                        !variant["mask_mod"].get<std::string>().empty();
  if (mask_mod && problem.contains("causal") && op.find("prefill") != std::string::npos) problem["causal"] = false;
  return true;
}

}  // namespace attnjit::cli

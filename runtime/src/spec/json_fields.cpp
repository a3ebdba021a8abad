#include "spec/json_fields.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"

namespace attnjit::spec_json {

namespace {

[[noreturn]] void wrong(const char* key, const nlohmann::json& v, const char* expected) {
  throw Error(Status::InvalidArgument,
              fmt::format("spec.{}={} is not allowed; expected {} (got a {})", key, v.dump(), expected, v.type_name()));
}

const nlohmann::json& required(const nlohmann::json& j, const char* key, const char* expected) {
  if (!j.is_object()) throw Error(Status::InvalidArgument, fmt::format("a kernel spec must be a JSON object, got {}", j.dump()));
  if (!j.contains(key))
    throw Error(Status::InvalidArgument, fmt::format("spec.{} is missing ({}) in {}", key, expected, j.dump()));
  return j.at(key);
}

}  // namespace

int int_field(const nlohmann::json& j, const char* key) {
  const auto& v = required(j, key, "an integer");
  if (!v.is_number_integer()) wrong(key, v, "an integer");
  const auto x = v.get<int64_t>();
  if (x < -(int64_t(1) << 30) || x > (int64_t(1) << 30)) wrong(key, v, "an integer of magnitude below 2^30");
  return static_cast<int>(x);
}

int int_field(const nlohmann::json& j, const char* key, int fallback) {
  return j.is_object() && j.contains(key) ? int_field(j, key) : fallback;
}

bool bool_field(const nlohmann::json& j, const char* key, bool fallback) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_boolean()) wrong(key, v, "true or false");
  return v.get<bool>();
}

std::string string_field(const nlohmann::json& j, const char* key) {
  const auto& v = required(j, key, "a string");
  if (!v.is_string()) wrong(key, v, "a string");
  return v.get<std::string>();
}

std::string string_field(const nlohmann::json& j, const char* key, const char* fallback) {
  return j.is_object() && j.contains(key) ? string_field(j, key) : std::string(fallback);
}

}  // namespace attnjit::spec_json

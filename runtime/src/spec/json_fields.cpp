#include "spec/json_fields.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>

#include "attnjit/error.hpp"

namespace attnjit {

namespace {

// Whose fields are read: "spec" or "problem", the prefix every message names a field with.
struct Owner {
  const char* name;
  const char* object;  // "a kernel spec", "a problem"
};
constexpr Owner kSpec{"spec", "a kernel spec"};
constexpr Owner kProblem{"problem", "a problem"};

[[noreturn]] void wrong(Owner owner, const char* key, const nlohmann::json& v, const char* expected) {
  throw Error(Status::InvalidArgument, fmt::format("{}.{}={} is not allowed; expected {} (got a {})", owner.name, key,
                                                   v.dump(), expected, v.type_name()));
}

void require_object(Owner owner, const nlohmann::json& j) {
  if (!j.is_object())
    throw Error(Status::InvalidArgument, fmt::format("{} must be a JSON object, got {}", owner.object, j.dump()));
}

bool has(const nlohmann::json& j, const char* key) { return j.is_object() && j.contains(key); }

const nlohmann::json& required(Owner owner, const nlohmann::json& j, const char* key, const char* expected) {
  require_object(owner, j);
  if (!j.contains(key))
    throw Error(Status::InvalidArgument,
                fmt::format("{}.{} is missing ({}) in {}", owner.name, key, expected, j.dump()));
  return j.at(key);
}

int64_t integer_in(Owner owner, const nlohmann::json& j, const char* key, int64_t lo, int64_t hi,
                   const char* range_name) {
  const auto& v = required(owner, j, key, "an integer");
  if (!v.is_number_integer()) wrong(owner, key, v, "an integer");
  // An unsigned value above INT64_MAX reads as negative through get<int64_t>; it is out of any range here.
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) wrong(owner, key, v, range_name);
  const auto x = v.get<int64_t>();
  if (x < lo || x > hi) wrong(owner, key, v, range_name);
  return x;
}

std::string string_in(Owner owner, const nlohmann::json& j, const char* key) {
  const auto& v = required(owner, j, key, "a string");
  if (!v.is_string()) wrong(owner, key, v, "a string");
  return v.get<std::string>();
}

bool bool_in(Owner owner, const nlohmann::json& j, const char* key, bool fallback) {
  if (!has(j, key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_boolean()) wrong(owner, key, v, "true or false");
  return v.get<bool>();
}

}  // namespace

namespace spec_json {

int int_field(const nlohmann::json& j, const char* key) {
  constexpr int64_t kBound = int64_t(1) << 30;
  return static_cast<int>(integer_in(kSpec, j, key, -kBound, kBound, "an integer of magnitude below 2^30"));
}
int int_field(const nlohmann::json& j, const char* key, int fallback) {
  return has(j, key) ? int_field(j, key) : fallback;
}
bool bool_field(const nlohmann::json& j, const char* key, bool fallback) { return bool_in(kSpec, j, key, fallback); }
std::string string_field(const nlohmann::json& j, const char* key) { return string_in(kSpec, j, key); }
std::string string_field(const nlohmann::json& j, const char* key, const char* fallback) {
  return has(j, key) ? string_field(j, key) : std::string(fallback);
}

}  // namespace spec_json

namespace problem_json {

int int_field(const nlohmann::json& j, const char* key) {
  return static_cast<int>(integer_in(kProblem, j, key, INT_MIN, INT_MAX, "a 32-bit integer"));
}
int int_field(const nlohmann::json& j, const char* key, int fallback) {
  return has(j, key) ? int_field(j, key) : fallback;
}
int64_t int64_field(const nlohmann::json& j, const char* key) {
  return integer_in(kProblem, j, key, INT64_MIN, INT64_MAX, "a 64-bit integer");
}
int64_t int64_field(const nlohmann::json& j, const char* key, int64_t fallback) {
  return has(j, key) ? int64_field(j, key) : fallback;
}
bool bool_field(const nlohmann::json& j, const char* key, bool fallback) {
  return bool_in(kProblem, j, key, fallback);
}
std::string string_field(const nlohmann::json& j, const char* key, const char* fallback) {
  return has(j, key) ? string_in(kProblem, j, key) : std::string(fallback);
}
std::optional<float> float_field(const nlohmann::json& j, const char* key) {
  if (!has(j, key) || j.at(key).is_null()) return std::nullopt;
  const auto& v = j.at(key);
  if (!v.is_number()) wrong(kProblem, key, v, "a number");
  return v.get<float>();
}

void require_keys(const nlohmann::json& j, const std::set<std::string>& keys, const std::string& op) {
  if (!j.is_object())
    throw Error(Status::InvalidArgument, fmt::format("a {} problem must be a JSON object, got {}", op, j.dump()));
  for (const auto& item : j.items())
    if (!keys.count(item.key()))
      throw Error(Status::InvalidArgument, fmt::format("problem.{} is not a {} field; allowed: {}", item.key(), op,
                                                       fmt::join(keys, ", ")));
}

}  // namespace problem_json

}  // namespace attnjit

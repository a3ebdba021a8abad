// Reading a spec's JSON fields with errors that name the field, the value and
// the expected type (a manifest is written by hand; nlohmann's own messages
// say neither which field nor which spec).
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace attnjit::spec_json {

// A missing field without a fallback, or one of the wrong type, throws Error(InvalidArgument).
int int_field(const nlohmann::json& j, const char* key);
int int_field(const nlohmann::json& j, const char* key, int fallback);
bool bool_field(const nlohmann::json& j, const char* key, bool fallback);
std::string string_field(const nlohmann::json& j, const char* key);
std::string string_field(const nlohmann::json& j, const char* key, const char* fallback);

}  // namespace attnjit::spec_json

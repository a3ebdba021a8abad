#include "ops/workspace_layout.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"

namespace attnjit::ops {

size_t WorkspaceLayout::add_float(std::string name, size_t bytes) { return add(std::move(name), bytes, false); }
size_t WorkspaceLayout::add_int(std::string name, size_t bytes) { return add(std::move(name), bytes, true); }

size_t WorkspaceLayout::add(std::string name, size_t bytes, bool is_int) {
  if (has(name)) throw Error(Status::Internal, fmt::format("workspace region '{}' is declared twice", name));
  size_t& end = is_int ? int_bytes_ : float_bytes_;
  const size_t offset = end;
  end += (bytes + kAlign - 1) / kAlign * kAlign;
  regions_.push_back({std::move(name), offset, bytes, is_int});
  return offset;
}

bool WorkspaceLayout::has(std::string_view name) const {
  for (const auto& r : regions_)
    if (r.name == name) return true;
  return false;
}

const WorkspaceRegion& WorkspaceLayout::region(std::string_view name) const {
  for (const auto& r : regions_)
    if (r.name == name) return r;
  throw Error(Status::Internal, fmt::format("workspace has no region '{}'", name));
}

nlohmann::json WorkspaceLayout::to_json() const {
  nlohmann::json regions = nlohmann::json::array();
  for (const auto& r : regions_)
    regions.push_back({{"name", r.name}, {"offset", r.offset}, {"bytes", r.bytes}, {"part", r.is_int ? "plan" : "workspace"}});
  return {{"float_bytes", float_bytes_}, {"int_bytes", int_bytes_}, {"regions", regions}};
}

}  // namespace attnjit::ops

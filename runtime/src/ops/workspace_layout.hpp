// A plan's workspace: named regions in one caller-provided device buffer, the
// float part (partial outputs and lse) first, then the int part (index arrays
// plan() uploads). Every region is 256-byte aligned, so any region can be
// read with the widest vector loads.
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace attnjit::ops {

struct WorkspaceRegion {
  std::string name;
  size_t offset = 0;  // from the start of the buffer
  size_t bytes = 0;
  bool is_int = false;
};

class WorkspaceLayout {
 public:
  static constexpr size_t kAlign = 256;

  // Adds a region and returns its offset. Float regions must all come before
  // int regions (the order plan() builds them in); names are unique.
  size_t add_float(std::string name, size_t bytes);
  size_t add_int(std::string name, size_t bytes);

  const WorkspaceRegion& region(std::string_view name) const;  // Error(Internal) if absent
  bool has(std::string_view name) const;
  const std::vector<WorkspaceRegion>& regions() const { return regions_; }
  size_t float_bytes() const { return float_bytes_; }
  size_t int_bytes() const { return total_ - float_bytes_; }
  size_t total_bytes() const { return total_; }
  nlohmann::json to_json() const;

 private:
  size_t add(std::string name, size_t bytes, bool is_int);
  std::vector<WorkspaceRegion> regions_;
  size_t float_bytes_ = 0, total_ = 0;
};

// The device address of a region inside the caller's buffer.
template <class T>
T* region_ptr(void* workspace, const WorkspaceRegion& r) {
  return reinterpret_cast<T*>(static_cast<char*>(workspace) + r.offset);
}

}  // namespace attnjit::ops

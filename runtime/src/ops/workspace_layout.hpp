// Where a plan's device data lives, as named regions in two places:
//  - float regions (partial outputs and lse of a KV split) in the caller's
//    workspace, scratch that run() fills and reads within one call, so any
//    number of plans may share one workspace on a stream;
//  - int regions (work lists, index arrays, counters that plan() uploads and
//    every later run() reads) in the plan's own memory (detail::PlanMemory).
// Each part starts at offset 0; every region is 256-byte aligned, so any
// region can be read with the widest vector loads.
#pragma once
#include <cuda.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace attnjit::ops {

struct WorkspaceRegion {
  std::string name;
  size_t offset = 0;  // from the start of its part
  size_t bytes = 0;
  bool is_int = false;  // plan memory (true) or the caller's workspace (false)
};

class WorkspaceLayout {
 public:
  static constexpr size_t kAlign = 256;

  // Adds a region and returns its offset in its part; names are unique.
  size_t add_float(std::string name, size_t bytes);
  size_t add_int(std::string name, size_t bytes);

  const WorkspaceRegion& region(std::string_view name) const;  // Error(Internal) if absent
  bool has(std::string_view name) const;
  const std::vector<WorkspaceRegion>& regions() const { return regions_; }
  size_t float_bytes() const { return float_bytes_; }  // the caller's workspace
  size_t int_bytes() const { return int_bytes_; }      // the plan's memory
  nlohmann::json to_json() const;

 private:
  size_t add(std::string name, size_t bytes, bool is_int);
  std::vector<WorkspaceRegion> regions_;
  size_t float_bytes_ = 0, int_bytes_ = 0;
};

// The device address of a float region inside the caller's workspace.
template <class T>
T* scratch_ptr(void* workspace, const WorkspaceRegion& r) {
  return reinterpret_cast<T*>(static_cast<char*>(workspace) + r.offset);
}
// The device address of an int region inside the plan's memory.
template <class T>
T* plan_ptr(CUdeviceptr plan_memory, const WorkspaceRegion& r) {
  return reinterpret_cast<T*>(plan_memory + r.offset);
}

}  // namespace attnjit::ops

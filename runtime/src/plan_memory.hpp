// The memory a plan owns: what plan() writes and the kernels read at run()
// (work lists, index arrays, merge counters), on the device, and the pinned
// host staging it is uploaded from.
//
// FlashInfer's wrappers keep their plan in memory each one owns (an int
// workspace and a pinned host buffer) and use the float workspace only as
// scratch while run() executes, so serving engines hand one float workspace
// to every wrapper and plan them all before running any. attnjit follows the
// same contract: the caller's workspace holds partial states only, and
// everything a later run() needs lives here.
//
// A CUDA graph that captured a run reads the device block and writes the
// table-check record at every replay, however long after the plan is gone:
// both are shared, and retain_while_captured() gives the graph a reference
// (a CUDA user object). The driver drops it from an internal thread where no
// CUDA call is allowed, so the reference lands on a list that the library
// empties (freeing what no one else holds) at a later PlanMemory call.
#pragma once
#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "table_check.hpp"

namespace attnjit::detail {

class PlanMemory {
 public:
  explicit PlanMemory(int device) : device_(device) {}
  ~PlanMemory();
  PlanMemory(const PlanMemory&) = delete;
  PlanMemory& operator=(const PlanMemory&) = delete;

  // Use the caller's device buffer (FlashInfer's int_workspace_buffer)
  // instead of memory of the library's own; it must outlive the plan and is
  // not freed here. Any plan made before must be made again.
  void borrow(void* buffer, size_t bytes);
  bool borrowed() const { return borrowed_; }

  // Room for `bytes` on the device at base(). Memory of the library's own
  // grows (never while `stream` captures a graph, and never once
  // freeze_address() was called: a captured graph keeps the address); a
  // borrowed buffer that is too small is Status::WorkspaceTooSmall naming
  // int_workspace_buffer.
  void reserve(size_t bytes, CUstream stream);
  // A CUDA graph may capture a run from now on: the address must not move.
  void freeze_address() { frozen_ = true; }

  // Host bytes for the next upload, zeroed. Staging alternates between two
  // pinned buffers, each reused only after the copy that last read it has
  // completed, so back-to-back plans never wait on the GPU.
  uint8_t* stage(size_t bytes);
  // Copies the staged bytes to base() on `stream` (ordered after the runs
  // enqueued before it, so a plan() between runs on one stream is safe).
  void upload(CUstream stream);

  // Where this plan's kernels record a bad device-table entry (a page id,
  // a length), and where plan(), run() and check() look for one. Kept apart
  // from the device buffer: borrow() does not move it.
  TableCheck& table_check() { return *table_check_; }

  // Every run() calls it before its launches: when `stream` captures a graph,
  // the graph keeps this plan's device block (the library's own, not a
  // borrowed one) and its table-check record alive until it is destroyed.
  // Nothing when `stream` does not capture.
  void retain_while_captured(CUstream stream);

  CUdeviceptr base() const { return device_ptr_; }
  size_t capacity() const { return device_bytes_; }
  size_t used() const { return used_; }  // bytes of the last upload: what a borrowed buffer must hold

  // Refuses plan() while `stream` captures: the upload would be recorded
  // into the graph and replay whatever the staging holds then.
  static void require_not_capturing(CUstream stream, const char* what);

 private:
  struct Staging {
    void* host = nullptr;
    size_t bytes = 0;
    CUevent copied = nullptr;  // recorded behind the last copy that read `host`
    bool pending = false;
  };
  struct DeviceBlock;  // memory of the library's own; freed when the last holder lets go
  void release_device();

  int device_;
  std::shared_ptr<TableCheck> table_check_ = std::make_shared<TableCheck>(device_);
  std::shared_ptr<DeviceBlock> block_;  // null when borrowed or not yet reserved
  uint64_t retained_capture_ = 0;       // the capture that last got a reference (ids start at 1)
  CUdeviceptr device_ptr_ = 0;
  size_t device_bytes_ = 0;
  bool borrowed_ = false, frozen_ = false;
  std::array<Staging, 2> staging_{};
  int staged_ = -1;  // the slot stage() last handed out, until upload()
  int next_ = 0;     // the slot stage() hands out next
  size_t staged_bytes_ = 0;
  size_t used_ = 0;
};

// Frees what graphs destroyed since the last call held alone. PlanMemory's
// reserve() and destructor call it; a test calls it to see the memory go.
// Not while a stream of the calling thread captures (it may synchronize).
void release_graph_held();

}  // namespace attnjit::detail

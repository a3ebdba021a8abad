// Device workspaces for the one-call entry points (single_decode_with_kv_cache
// without a caller workspace). Every call leases a buffer of its own: a lease
// is handed only to one caller at a time, and a returned buffer is reused or
// freed only after the GPU has finished every launch that used it (an event
// recorded on the caller's stream after its launches). So two threads, or two
// streams, never share partial results, and no launch ever reads freed memory.
//
// plan/run with a caller-owned workspace is the path for CUDA graphs: the
// pool refuses to lease while the stream is capturing, since a buffer whose
// lifetime the graph would outlive cannot be tracked by an event.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace attnjit::detail {

class WorkspacePool {
 public:
  class Lease {
   public:
    Lease(WorkspacePool* pool, size_t slot, void* ptr, size_t bytes, CUstream stream)
        : pool_(pool), slot_(slot), ptr_(ptr), bytes_(bytes), stream_(stream) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), slot_(o.slot_), ptr_(o.ptr_), bytes_(o.bytes_), stream_(o.stream_) {
      o.pool_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    // Returns the buffer, busy until the work enqueued on the lease's stream
    // so far is done (whether or not a launch got enqueued: that is safe).
    ~Lease();
    void* get() const { return ptr_; }
    size_t bytes() const { return bytes_; }

   private:
    WorkspacePool* pool_;
    size_t slot_;
    void* ptr_;
    size_t bytes_;
    CUstream stream_;
  };

  explicit WorkspacePool(int device) : device_(device) {}
  ~WorkspacePool();
  WorkspacePool(const WorkspacePool&) = delete;
  WorkspacePool& operator=(const WorkspacePool&) = delete;

  // A buffer of at least `bytes`, 256-byte aligned, used by nobody else until
  // the lease is released. Throws Error(InvalidArgument) while `stream` captures.
  Lease acquire(size_t bytes, CUstream stream);

  size_t buffers() const;  // for tests: how many the pool holds

 private:
  struct Slot {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
    CUevent done = nullptr;  // recorded after the last lease's launches
    bool leased = false;
  };
  bool idle(Slot& s) const;  // not leased and its event has completed
  void give_back(size_t slot, CUstream stream);

  int device_;
  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
};

}  // namespace attnjit::detail

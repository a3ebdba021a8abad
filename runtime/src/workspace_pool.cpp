#include "workspace_pool.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"

namespace attnjit::detail {

namespace {
// Buffers are at least this large, so a decode loop whose split count creeps
// up step by step does not allocate a new one each step.
constexpr size_t kMinBytes = 16u << 20;
}  // namespace

WorkspacePool::Lease::~Lease() {
  if (pool_) pool_->give_back(slot_, stream_);
}

bool WorkspacePool::idle(Slot& s) const {
  if (s.leased) return false;
  if (!s.done) return true;
  const CUresult r = cuda::driver().EventQuery(s.done);
  if (r == CUDA_ERROR_NOT_READY) return false;
  ATTNJIT_CU(r);
  return true;
}

WorkspacePool::Lease WorkspacePool::acquire(size_t bytes, CUstream stream) {
  const auto& cu = cuda::driver();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  ATTNJIT_CU(cu.StreamIsCapturing(stream, &capture));
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
    throw Error(Status::InvalidArgument,
                fmt::format("workspace=null while stream {} is capturing a CUDA graph: this plan needs {} bytes of "
                            "workspace; pass your own buffer (plan/run) so the graph owns its lifetime",
                            static_cast<void*>(stream), bytes));
  cuda::ScopedDevice scope(device_);
  std::lock_guard<std::mutex> lock(mutex_);
  // The smallest idle buffer that fits.
  size_t best = slots_.size();
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].bytes >= bytes && idle(slots_[i]) && (best == slots_.size() || slots_[i].bytes < slots_[best].bytes))
      best = i;
  if (best == slots_.size()) {
    // None fits: free idle ones that are too small (they would never fit this
    // caller again), then allocate.
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (s.ptr && s.bytes < bytes && idle(s)) {
        ATTNJIT_CU(cu.MemFree(s.ptr));
        if (s.done) cu.EventDestroy(s.done);
        s = Slot{};
      }
    }
    Slot fresh;
    fresh.bytes = std::max(bytes, kMinBytes);
    ATTNJIT_CU(cu.MemAlloc(&fresh.ptr, fresh.bytes));
    best = slots_.size();
    for (size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].ptr) {
        best = i;
        break;
      }
    if (best == slots_.size()) slots_.push_back(fresh);
    else slots_[best] = fresh;
  }
  Slot& s = slots_[best];
  s.leased = true;
  return Lease(this, best, reinterpret_cast<void*>(s.ptr), s.bytes, stream);
}

void WorkspacePool::give_back(size_t slot, CUstream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& s = slots_[slot];
  s.leased = false;
  try {
    const auto& cu = cuda::driver();
    cuda::ScopedDevice scope(device_);
    if (!s.done) ATTNJIT_CU(cu.EventCreate(&s.done, CU_EVENT_DISABLE_TIMING));
    ATTNJIT_CU(cu.EventRecord(s.done, stream));
  } catch (...) {
    // Without an event we cannot know when the GPU is done: never reuse it.
    s.leased = true;
  }
}

size_t WorkspacePool::buffers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& s : slots_) n += s.ptr != 0;
  return n;
}

WorkspacePool::~WorkspacePool() {
  if (!cuda::driver_available()) return;
  try {
    const auto& cu = cuda::driver();
    cuda::ScopedDevice scope(device_);
    for (auto& s : slots_) {
      if (s.done) {
        cu.EventSynchronize(s.done);  // the Runtime is going away; its launches must finish first
        cu.EventDestroy(s.done);
      }
      if (s.ptr) cu.MemFree(s.ptr);
    }
  } catch (...) {
  }
}

}  // namespace attnjit::detail

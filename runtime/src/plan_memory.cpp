#include "plan_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"

namespace attnjit::detail {

namespace {
// Plans grow with the batch; rounding up keeps a batch that creeps up step by
// step from reallocating every step.
size_t rounded(size_t bytes) {
  size_t r = 4096;
  while (r < bytes) r *= 2;
  return r;
}

// A graph's references: the device block (type-erased, its deleter kept) and the record.
struct GraphHeld {
  std::shared_ptr<void> block;
  std::shared_ptr<TableCheck> check;
};

// What destroyed graphs let go of, waiting for release_graph_held(). Never
// destroyed: the driver may call back while the process exits.
struct Released {
  std::mutex mutex;
  std::vector<GraphHeld*> held;
};
Released& released() {
  static auto* r = new Released;
  return *r;
}

// The user object's destructor, on the driver's internal thread: no CUDA
// call is allowed there, so it only hands the references on.
void CUDA_CB on_graph_release(void* held) {
  Released& r = released();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.held.push_back(static_cast<GraphHeld*>(held));
}
}  // namespace

void release_graph_held() {
  std::vector<GraphHeld*> held;
  {
    Released& r = released();
    std::lock_guard<std::mutex> lock(r.mutex);
    held.swap(r.held);
  }
  for (GraphHeld* h : held) delete h;  // the last holder frees (DeviceBlock, ~TableCheck)
}

struct PlanMemory::DeviceBlock {
  int device;
  CUdeviceptr ptr = 0;
  ~DeviceBlock() {
    if (ptr) cuda::release_when_idle(device, [this] { cuda::driver().MemFree(ptr); });
  }
};

PlanMemory::~PlanMemory() {
  try {
    block_.reset();  // freed here unless a graph holds it
    table_check_.reset();
    if (staging_[0].host || staging_[1].host) {
      const auto& cu = cuda::driver();
      cuda::ScopedDevice scope(device_);
      for (auto& s : staging_) {
        if (s.pending) cu.EventSynchronize(s.copied);
        if (s.copied) cu.EventDestroy(s.copied);
        if (s.host) cu.MemFreeHost(s.host);
      }
    }
    release_graph_held();
  } catch (...) {  // a destructor reports nothing: the process may be exiting
  }
}

void PlanMemory::release_device() {
  block_.reset();  // freed once no graph holds it either
  device_ptr_ = 0;
  device_bytes_ = 0;
}

void PlanMemory::retain_while_captured(CUstream stream) {
  const auto& cu = cuda::driver();
  cuda::ScopedDevice scope(device_);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t capture = 0;
  CUgraph graph = nullptr;
  ATTNJIT_CU(cu.StreamGetCaptureInfo(stream, &status, &capture, &graph, nullptr, nullptr));
  // An invalidated capture ends in an error and no graph.
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !graph) return;
  if (capture == retained_capture_) return;  // this graph holds a reference already
  auto held = std::make_unique<GraphHeld>(GraphHeld{block_, table_check_});
  CUuserObject object = nullptr;
  ATTNJIT_CU(cu.UserObjectCreate(&object, held.get(), on_graph_release, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  held.release();  // the user object owns it now
  const CUresult r = cu.GraphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE);
  if (r != CUDA_SUCCESS) cu.UserObjectRelease(object, 1);
  ATTNJIT_CU(r);
  retained_capture_ = capture;
}

void PlanMemory::borrow(void* buffer, size_t bytes) {
  if (!buffer)
    throw Error(Status::InvalidArgument, "int_workspace_buffer is null; allowed: a device buffer of the plan's device");
  if (reinterpret_cast<uintptr_t>(buffer) % 256 != 0)
    throw Error(Status::InvalidArgument,
                fmt::format("int_workspace_buffer={} is not allowed; allowed: a 256-byte aligned device address",
                            buffer));
  release_device();
  device_ptr_ = reinterpret_cast<CUdeviceptr>(buffer);
  device_bytes_ = bytes;
  borrowed_ = true;
  used_ = 0;
}

void PlanMemory::require_not_capturing(CUstream stream, const char* what) {
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  ATTNJIT_CU(cuda::driver().StreamIsCapturing(stream, &capture));
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
    throw Error(Status::InvalidArgument,
                fmt::format("{}: stream {} is capturing a CUDA graph; plan() uploads the plan and cannot be "
                            "captured; allowed: plan() before capture (run() is capturable)",
                            what, static_cast<void*>(stream)));
}

void PlanMemory::reserve(size_t bytes, CUstream stream) {
  if (bytes <= device_bytes_) return;
  if (borrowed_)
    throw Error(Status::WorkspaceTooSmall,
                fmt::format("int_workspace_buffer: {} bytes are too few; this plan needs {} bytes of plan memory",
                            device_bytes_, bytes));
  if (frozen_ && device_ptr_)
    throw Error(Status::InvalidArgument,
                fmt::format("plan(): this plan needs {} bytes of plan memory where it has {}, and a CUDA graph may "
                            "have captured a run at the present address; allowed: a plan within the sizes the "
                            "wrapper was made for",
                            bytes, device_bytes_));
  require_not_capturing(stream, "plan()");
  release_graph_held();
  release_device();
  cuda::ScopedDevice scope(device_);
  const size_t want = rounded(bytes);
  auto block = std::make_shared<DeviceBlock>(DeviceBlock{device_});
  ATTNJIT_CU(cuda::driver().MemAlloc(&block->ptr, want));
  block_ = std::move(block);
  device_ptr_ = block_->ptr;
  device_bytes_ = want;
}

uint8_t* PlanMemory::stage(size_t bytes) {
  const auto& cu = cuda::driver();
  cuda::ScopedDevice scope(device_);
  Staging& s = staging_[next_];
  if (s.pending) {
    ATTNJIT_CU(cu.EventSynchronize(s.copied));
    s.pending = false;
  }
  if (s.bytes < bytes) {
    if (s.host) ATTNJIT_CU(cu.MemFreeHost(s.host));
    s.host = nullptr;
    s.bytes = 0;
    const size_t want = rounded(bytes);
    ATTNJIT_CU(cu.MemAllocHost(&s.host, want));
    s.bytes = want;
  }
  if (!s.copied) ATTNJIT_CU(cu.EventCreate(&s.copied, CU_EVENT_DISABLE_TIMING));
  std::memset(s.host, 0, bytes);
  staged_ = next_;
  next_ ^= 1;
  staged_bytes_ = bytes;
  return static_cast<uint8_t*>(s.host);
}

void PlanMemory::upload(CUstream stream) {
  if (staged_ < 0) throw Error(Status::Internal, "PlanMemory::upload without stage()");
  Staging& s = staging_[staged_];
  staged_ = -1;
  used_ = staged_bytes_;
  if (staged_bytes_ == 0) return;
  if (staged_bytes_ > device_bytes_)
    throw Error(Status::Internal, fmt::format("PlanMemory: {} staged bytes past the reserved {}", staged_bytes_,
                                              device_bytes_));
  const auto& cu = cuda::driver();
  cuda::ScopedDevice scope(device_);
  ATTNJIT_CU(cu.MemcpyHtoDAsync(device_ptr_, s.host, staged_bytes_, stream));
  ATTNJIT_CU(cu.EventRecord(s.copied, stream));
  s.pending = true;
}

}  // namespace attnjit::detail

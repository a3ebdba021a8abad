#include "ops/block_mask_keep.hpp"

#include <cuda.h>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"

namespace attnjit::ops {

BlockMaskKeep::~BlockMaskKeep() {
  try {
    free_copies();
  } catch (...) {  // a destructor reports nothing: the process may be exiting
  }
}

void BlockMaskKeep::free_copies() {
  bool any = false;
  for (const Copy& c : copies_) any = any || c.ptr;
  if (any) {
    // Runs already enqueued may still read a copy: it goes back once the device is idle.
    cuda::ScopedDevice scope(device_);
    cuda::driver().CtxSynchronize();
    for (const Copy& c : copies_)
      if (c.ptr) cuda::driver().MemFree(CUdeviceptr(c.ptr));
  }
  copies_.clear();
}

void BlockMaskKeep::resize(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > bytes_) {
    free_copies();
    bytes_ = bytes;
  }
  for (Copy& c : copies_) c.tag = 0;
}

void BlockMaskKeep::Use::launched() {
  if (tag_) *tag_ = version_;
  if (lock_.owns_lock()) lock_.unlock();
}

BlockMaskKeep::Use BlockMaskKeep::use(Stream stream, uint64_t version) {
  Use u;
  if (bytes_ == 0) return u;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  ATTNJIT_CU(cuda::driver().StreamIsCapturing(stream, &capture));
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return u;
  u.lock_ = std::unique_lock<std::mutex>(mutex_);
  Copy* copy = nullptr;
  for (Copy& c : copies_)
    if (c.stream == stream) copy = &c;
  if (!copy) {
    if (copies_.size() >= size_t(kStreams)) {
      u.lock_.unlock();
      return u;
    }
    CUdeviceptr ptr = 0;
    cuda::ScopedDevice scope(device_);
    ATTNJIT_CU(cuda::driver().MemAlloc(&ptr, bytes_));
    copies_.reserve(kStreams);  // no copy moves while a Use points at its tag
    copies_.push_back({stream, uint64_t(ptr), 0});
    copy = &copies_.back();
  }
  u.kept_ = reinterpret_cast<int32_t*>(copy->ptr);
  u.classify_ = copy->tag != version;
  u.version_ = version;
  u.tag_ = &copy->tag;
  // Stale until this run's launches are all in: a launch that throws leaves it to be classified again.
  if (u.classify_) copy->tag = 0;
  return u;
}

}  // namespace attnjit::ops

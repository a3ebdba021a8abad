// The tile classes a block-sparse plan keeps between runs whose variant says
// Reclassify::OnBind (issue 31 item 2, "reusable across calls", as
// FlexAttention's BlockMask): a copy per stream, each tagged with the
// variant values' version it was classified for, so a run classifies only
// when its variant was bound since. A copy is read and rewritten only by
// runs on its own stream, so stream order is all the ordering it needs.
//
// Not kept: a run on a capturing stream (a graph must not depend on a copy
// that later runs rewrite: it classifies into the workspace, as EachRun) or
// on a stream past the first kStreams of the plan. Streams are told apart by
// handle: a stream destroyed with runs of the plan still pending, and
// another created with the same handle before they finish, are not.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "attnjit/tensor.hpp"

namespace attnjit::ops {

class BlockMaskKeep {
 public:
  static constexpr int kStreams = 4;

  explicit BlockMaskKeep(int device) : device_(device) {}
  ~BlockMaskKeep();  // frees once the device is idle (runs may still read a copy)
  BlockMaskKeep(const BlockMaskKeep&) = delete;
  BlockMaskKeep& operator=(const BlockMaskKeep&) = delete;

  // Bytes of each copy (the plan's block_mask region). A batch plan calls it
  // at every plan(): every copy is stale after, and a larger size frees them
  // (once the device is idle) to be made again at their stream's next run.
  void resize(size_t bytes);

  // One run's classes, held (with the lock) while the run launches.
  class Use {
   public:
    int32_t* kept() const { return kept_; }    // null: classify into the workspace, keep nothing
    bool classify() const { return classify_; }  // false: the copy holds this version's classes
    // After the run's launches: the copy is this version's from now on.
    void launched();

   private:
    friend class BlockMaskKeep;
    std::unique_lock<std::mutex> lock_;
    int32_t* kept_ = nullptr;
    uint64_t* tag_ = nullptr;
    uint64_t version_ = 0;
    bool classify_ = true;
  };
  // The copy of `stream` for values `version` (>= 1), made on first use.
  Use use(Stream stream, uint64_t version);

 private:
  struct Copy {
    Stream stream;
    uint64_t ptr = 0;  // CUdeviceptr
    uint64_t tag = 0;  // the version its classes are of; 0: none
  };
  void free_copies();

  int device_;
  size_t bytes_ = 0;
  std::mutex mutex_;
  std::vector<Copy> copies_;
};

}  // namespace attnjit::ops

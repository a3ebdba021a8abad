// A CUDA graph captured (global mode) from what a callable launches on a
// stream, instantiated, and destroyed with the object. Global mode: an
// allocation or synchronization inside the callable invalidates the capture,
// so a clean capture shows the run does neither.
#pragma once
#include "cuda/driver.hpp"

namespace attnjit::test {

class CapturedGraph {
 public:
  template <class Record>
  CapturedGraph(CUstream stream, Record&& record) {
    const auto& cu = cuda::driver();
    ATTNJIT_CU(cu.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    try {
      record();
    } catch (...) {  // end the capture, so the stream is usable for the rest of the test
      CUgraph dropped = nullptr;
      cu.StreamEndCapture(stream, &dropped);
      if (dropped) cu.GraphDestroy(dropped);
      throw;
    }
    ATTNJIT_CU(cu.StreamEndCapture(stream, &graph_));
    ATTNJIT_CU(cu.GraphInstantiate(&exec_, graph_, 0));
  }
  ~CapturedGraph() {
    if (exec_) cuda::driver().GraphExecDestroy(exec_);
    if (graph_) cuda::driver().GraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  void launch(CUstream stream) const { ATTNJIT_CU(cuda::driver().GraphLaunch(exec_, stream)); }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

}  // namespace attnjit::test

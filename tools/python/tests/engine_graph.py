"""A call recorded once into a CUDA graph and replayed, as vLLM's and SGLang's CUDA-graph runners do with a
model's forward (test_engine_harness.py). Imported after the GPU tests have skipped without torch or a CUDA
device."""

import torch


class CapturedCall:
    """fn() run once on a side stream (the engines' warm-up: kernels load, nothing is allocated under
    capture), then recorded into a graph. replay() returns what fn returned during capture: tensors in the
    graph's pool that each replay rewrites. fn must read only fixed buffers, which the caller refreshes
    before each replay."""

    def __init__(self, fn):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.result = fn()

    def replay(self):
        self.graph.replay()
        return self.result

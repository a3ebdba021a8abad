"""The in-process contenders of fa3_ws_speed.py on one GPU: cuDNN and flash SDPA, FlashInfer's ragged
prefill wrapper (fa3, fa2), and the bf16 GEMM rate. Each call runs `iters` times in one CUDA graph (plain
calls where capture fails: the "how" field says which), rotating over input sets; the contenders of a
point are timed interleaved, rep by rep, so drift falls on all alike; medians of `reps` replays.

Run as a script it builds FlashInfer's module for one backend and head dim (a tiny plan + run), so the
driver can build fa3 and fa2 side by side in child processes before any timing:
  python3 bench/prefill_peers.py --build fa3 --head-dim 128
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from compare_peers import median_us, prepared  # graph capture with a plain fallback; interleaved medians

WORKSPACE_BYTES = 256 << 20


def time_interleaved(fns, sets, iters, reps, plain=()):
    """name -> {"us", "how"} (median microseconds per call) or {"error"} for each fn(i) in `fns`; the names in
    `plain` are timed as plain calls, not captured."""
    out, runs = {}, {}
    for name, fn in fns.items():
        try:
            runs[name], how = prepared(fn, sets, iters, graph=name not in plain)
            out[name] = {"how": how}
        except Exception as e:  # one contender's failure must not hide the others
            torch.cuda.synchronize()
            out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    host = {}
    for name, us in median_us(runs, iters, reps, warm=1, host=host).items():
        out[name]["us"] = us
        if name in host:
            out[name]["host_us"] = host[name]  # plain calls: the host's time to enqueue one
    return out


def gemm_tflops(n=8192, iters=10, reps=15):
    """bf16 dense GEMM rate: torch.matmul of random n x n matrices (2 n^3 FLOPs), median TFLOP/s."""
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    c = torch.empty(n, n, dtype=torch.bfloat16, device="cuda")
    r = time_interleaved({"gemm": lambda i: torch.matmul(a, b, out=c)}, 1, iters, reps)["gemm"]
    return 2.0 * n ** 3 / (r["us"] * 1e-6) / 1e12


def import_flashinfer():
    """(module, None) or (None, why)."""
    try:
        import flashinfer
        return flashinfer, None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"[:300]


def flashinfer_ragged(flashinfer, backend, indptr, heads, head_dim, causal, workspace):
    """FlashInfer's ragged prefill wrapper with `backend`, planned (plan() JIT-builds the module if needed)."""
    w = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD", backend=backend)
    w.plan(indptr, indptr, heads, heads, head_dim, causal=causal, q_data_type=torch.bfloat16)
    return w


def measure_point(shape, causal, sets, iters, reps, flashinfer, fi_backends, workspace):
    """name -> result for the in-process contenders on one (shape, mask); their inputs, outputs and graphs
    are given back to the device before the next point (and the attnjit CLI's runs)."""
    res = _measure_point(shape, causal, sets, iters, reps, flashinfer, fi_backends, workspace)
    torch.cuda.empty_cache()
    return res


def _measure_point(shape, causal, sets, iters, reps, flashinfer, fi_backends, workspace):
    """q, k, v of `sets` random input sets as [b * s, h, d] (FlashInfer's ragged NHD), SDPA on [b, h, s, d]
    views of the same memory."""
    b, s, h, d = shape.batch, shape.seqlen, shape.heads, shape.head_dim
    qkv = [[torch.randn(b * s, h, d, dtype=torch.bfloat16, device="cuda") for _ in range(3)] for _ in range(sets)]
    bhsd = [[x.view(b, s, h, d).transpose(1, 2) for x in t] for t in qkv]
    out = torch.empty(b * s, h, d, dtype=torch.bfloat16, device="cuda")
    fns = {}
    for name, backend in (("cuDNN SDPA", SDPBackend.CUDNN_ATTENTION), ("flash SDPA", SDPBackend.FLASH_ATTENTION)):
        def sdpa(i, backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(*bhsd[i], is_causal=causal)
        fns[name] = sdpa
    errors = {}
    for backend in fi_backends:
        name = f"FlashInfer {backend}"
        try:
            indptr = torch.arange(0, b * s + 1, s, dtype=torch.int32, device="cuda")
            w = flashinfer_ragged(flashinfer, backend, indptr, h, d, causal, workspace)
            fns[name] = lambda i, w=w: w.run(*qkv[i], out=out)
        except Exception as e:
            errors[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    res = time_interleaved(fns, sets, iters, reps)
    res.update(errors)
    return res


def build_flashinfer(backend, head_dim):
    """Builds (or loads) FlashInfer's ragged prefill module for bf16 at head_dim and runs it once."""
    import flashinfer
    h, s = 2048 // head_dim, 128
    q = torch.randn(s, h, head_dim, dtype=torch.bfloat16, device="cuda")
    indptr = torch.tensor([0, s], dtype=torch.int32, device="cuda")
    ws = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    w = flashinfer_ragged(flashinfer, backend, indptr, h, head_dim, True, ws)
    w.run(q, q, q)
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", choices=["fa2", "fa3"], required=True, help="FlashInfer backend to build")
    ap.add_argument("--head-dim", type=int, choices=[64, 128, 256], required=True)
    args = ap.parse_args()
    t0 = time.time()
    build_flashinfer(args.build, args.head_dim)
    print(f"built FlashInfer {args.build} d{args.head_dim} in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    sys.exit(main())

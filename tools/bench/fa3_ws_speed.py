"""Single prefill speed: attnjit's warp-specialized Hopper skeleton (backend
"fa3_ws") against today's fa3 and cuDNN SDPA, in one run on one GPU. attnjit
is timed by its CLI (`attnjit bench --problem`, the median of 20 batches of 4
runs), SDPA by CUDA events around 20 calls after a warm-up. TFLOP/s =
4 * heads * attended pairs * head_dim (causal: the pairs below the diagonal).
The batches of the issue's table (seqlen x batch at 16k tokens) run as one
request with batch x heads heads: the same work and the same tiles.

  python3 tools/bench/fa3_ws_speed.py --cli .gpu/attnjit --json out.json [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SHAPES = [  # (head_dim, seqlen, heads): 2048 / head_dim heads x (16k / seqlen) requests
    (128, 1024, 16 * 16), (128, 4096, 16 * 4), (128, 16384, 16), (64, 4096, 32 * 4), (256, 4096, 8 * 4),
]
QUICK = [(128, 4096, 16 * 4), (128, 16384, 16)]


def attnjit_tflops(cli, d, n, h, causal, backend):
    problem = {"op": "single_prefill", "num_qo_heads": h, "num_kv_heads": h, "head_dim": d, "qo_len": n,
               "kv_len": n, "q_dtype": "bfloat16", "causal": causal, "backend": backend}
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        r = subprocess.run([cli, "bench", "--skip-jit", "--problem", json.dumps(problem), "--json", f.name],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            return None, (r.stderr or r.stdout).strip().splitlines()[-1:]
        res = json.load(open(f.name))["results"][0]
        return res["tflops"], res["plan"].get("describe", "")


def sdpa_tflops(d, n, h, causal):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(1, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    try:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for _ in range(3):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            for _ in range(20):
                start.record()
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e-3)
    except Exception as e:  # no cuDNN attention in this torch: the column stays empty
        return None
    times.sort()
    pairs = n * (n + 1) / 2 if causal else n * n
    return 4 * h * pairs * d / times[len(times) // 2] / 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default="build/attnjit")
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rows = []
    print(f"{'d':>4} {'seq':>6} {'heads':>5} {'mask':>6} {'fa3_ws':>8} {'fa3':>8} {'cuDNN':>8} {'ws/fa3':>7} {'ws/cuDNN':>8}")
    for d, n, h in QUICK if args.quick else SHAPES:
        for causal in (False, True):
            ws, ws_plan = attnjit_tflops(args.cli, d, n, h, causal, "fa3_ws")
            fa3, _ = attnjit_tflops(args.cli, d, n, h, causal, "fa3")
            cudnn = sdpa_tflops(d, n, h, causal)
            fmt = lambda x: f"{x:8.1f}" if isinstance(x, float) else f"{'-':>8}"
            ratio = lambda a, b: f"{a / b:7.2f}" if isinstance(a, float) and isinstance(b, float) else f"{'-':>7}"
            print(f"{d:>4} {n:>6} {h:>5} {'causal' if causal else 'full':>6} {fmt(ws)} {fmt(fa3)} {fmt(cudnn)} "
                  f"{ratio(ws, fa3)} {ratio(ws, cudnn):>8}", flush=True)
            if not isinstance(ws, float):
                print("   fa3_ws:", ws_plan)
            rows.append({"head_dim": d, "seqlen": n, "heads": h, "causal": causal, "fa3_ws_tflops": ws,
                         "fa3_tflops": fa3, "cudnn_tflops": cudnn})
    if args.json:
        json.dump({"rows": rows}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())

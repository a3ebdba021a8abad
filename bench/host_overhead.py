"""Host cost per call of the one-call entry points (single prefill, single decode), attnjit beside
FlashInfer: wall time of enqueueing many calls on small shapes (the GPU keeps up, so the host is the
limit), then a cProfile of attnjit's call split by function (Python wrapper against the C call).
A serving engine that runs these eagerly pays this per layer.
    python3 bench/host_overhead.py [--json out.json]
"""
import argparse
import cProfile
import io
import json
import pstats
import sys
import time

import torch

import attnjit

try:
    import flashinfer
except Exception:  # noqa: BLE001 - any import failure means: no peer in this run
    flashinfer = None


def host_us(fn, calls=400):
    """Median over 5 rounds of the wall microseconds per call to enqueue `calls` calls."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - t0) * 1e6 / calls)
        torch.cuda.synchronize()
    return sorted(rounds)[2]


def profile(fn, calls=300):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
    return out.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    dev = "cuda"
    cases = {}
    # Prefill: 128 tokens, 32 / 8 heads, d 128 against 128 and 2048 keys (the second splits the KV).
    for kv_len in (128, 2048):
        q = torch.randn(128, 32, 128, dtype=torch.bfloat16, device=dev)
        k = torch.randn(kv_len, 8, 128, dtype=torch.bfloat16, device=dev)
        v = torch.randn_like(k)
        cases[f"single prefill 128 x {kv_len}"] = {
            "attnjit": lambda q=q, k=k, v=v: attnjit.single_prefill_with_kv_cache(q, k, v, causal=True),
            "flashinfer": None if flashinfer is None else
            (lambda q=q, k=k, v=v: flashinfer.single_prefill_with_kv_cache(q, k, v, causal=True)),
        }
    q = torch.randn(32, 128, dtype=torch.bfloat16, device=dev)
    k = torch.randn(4096, 8, 128, dtype=torch.bfloat16, device=dev)
    v = torch.randn_like(k)
    cases["single decode 4096"] = {
        "attnjit": lambda: attnjit.single_decode_with_kv_cache(q, k, v),
        "flashinfer": None if flashinfer is None else (lambda: flashinfer.single_decode_with_kv_cache(q, k, v)),
    }
    results = {}
    for case, fns in cases.items():
        row = {}
        for who, fn in fns.items():
            if fn is None:
                continue
            try:
                row[who] = round(host_us(fn), 1)
            except Exception as e:  # noqa: BLE001 - report and go on
                row[who] = f"{type(e).__name__}: {e}"[:200]
        results[case] = row
        print(f"{case:<28} host us/call " + " | ".join(f"{w}: {x}" for w, x in row.items()), flush=True)
    for case, fns in cases.items():
        print(f"\n== cProfile of attnjit, {case}\n" + profile(fns["attnjit"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

"""Where a plain call's time goes: host time to enqueue it, device time per call, and the kernels each
call launches with their device time (torch.profiler), for user_variant_speed.py's FlexAttention masks
(16k tokens, 16 heads, d 128) through single prefill: the block-sparse snippet kept across calls
(reclassify="on_bind", which user_variant_speed.py times as plain calls) and the built-in twin.
A call whose device time per call exceeds its kernels' sum by more than launch gaps is host-bound.

    python3 bench/call_gaps.py --mask window --json out.json      (on the GPU machine; env.sh's PYTHONPATH)
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import user_variant_speed as uvs  # noqa: E402  (the snippets and shapes the speed table uses)


def calls(attnjit, mask):
    T, H, D, W = uvs.FLEX["tokens"], uvs.FLEX["heads"], uvs.FLEX["head_dim"], uvs.FLEX["window"]
    torch.manual_seed(2)
    q = torch.randn(T, H, D, dtype=torch.bfloat16, device="cuda")
    k, v = torch.randn_like(q), torch.randn_like(q)
    sparse = {"block_sparse": True, "heads_vary": False}
    prefill = attnjit.single_prefill_with_kv_cache
    if mask == "window":
        var = uvs.make_variant(attnjit, "window", {"offset": 0, "window": W}, **sparse, reclassify="on_bind")
        return {"on_bind snippet": lambda: prefill(q, k, v, variant=var),
                "built-in window_left": lambda: prefill(q, k, v, causal=True, window_left=W)}
    doc = uvs.document_ids(torch, uvs.document_lengths(T, uvs.FLEX["documents"]))
    var = uvs.make_variant(attnjit, "document", {"doc": doc}, **sparse, reclassify="on_bind")
    return {"on_bind snippet": lambda: prefill(q, k, v, variant=var)}


def measure(fn, n):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    host, device = [], []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host.append((time.perf_counter() - t0) * 1e6 / n)
        b.record()
        b.synchronize()
        device.append(a.elapsed_time(b) * 1e3 / n)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.key_averages():
        if e.device_time_total > 0:
            kernels[e.key] = {"calls_per_call": e.count / n, "us_per_call": e.device_time_total / n}
    return {"host_us_per_call": statistics.median(host), "device_us_per_call": statistics.median(device),
            "kernels": kernels}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mask", choices=["window", "document"], default="window")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    import attnjit
    out = {"device": torch.cuda.get_device_name(), "mask": args.mask, "rows": {}}
    for name, fn in calls(attnjit, args.mask).items():
        r = out["rows"][name] = measure(fn, args.calls)
        ks = "; ".join(f"{k[:50]} {v['calls_per_call']:.1f}x {v['us_per_call']:.1f} us" for k, v in r["kernels"].items())
        print(f"{args.mask} {name}: host {r['host_us_per_call']:.1f} us/call, device {r['device_us_per_call']:.1f}"
              f" us/call; kernels: {ks}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

"""Decode attention: attnjit vs PyTorch SDPA (flash, cuDNN, efficient) in one process.

Every contender runs the same problem (one query token per head, bf16, GQA via
enable_gqa) captured in a CUDA graph of `batch` calls that rotate over K/V sets
totalling more than the L2, replayed after warm-up; the median over replays is
reported with achieved KV bandwidth and its ratio to a device-to-device copy
measured in the same run.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import attnjit


def time_graph(fn, batch, reps=30):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):
            fn(i)  # warm-up and plan outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(batch):
            fn(i)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / batch)
    return statistics.median(times)


def copy_rate():
    n = 1 << 30
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = time_graph(lambda i: dst.copy_(src), 4)
    return 2.0 * n / (us * 1e-6)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--kv-len", type=int, nargs="*", default=[4096, 32768, 131072])
    args = ap.parse_args()
    torch.manual_seed(0)
    copy = copy_rate()
    print(f"device: {torch.cuda.get_device_name()}  copy (read+write): {copy / 1e9:.0f} GB/s")
    rows = []
    header = f"{'Hq':>4} {'Hkv':>4} {'kv_len':>7} " + "".join(f"{n:>22}" for n in ["attnjit", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient"])
    print(header + "   (us | x copy)")
    for hq, hkv in [(32, 8), (32, 32), (64, 8)]:
        for n in args.kv_len:
            d = 128
            kv_bytes = n * hkv * d * 2
            sets = max(2, min(64, (400 << 20) // (2 * kv_bytes) + 1))
            q = torch.randn(hq, d, dtype=torch.bfloat16, device="cuda")
            ks = [torch.randn(n, hkv, d, dtype=torch.bfloat16, device="cuda") for _ in range(sets)]
            vs = [torch.randn(n, hkv, d, dtype=torch.bfloat16, device="cuda") for _ in range(sets)]
            # SDPA wants [B, H, S, D]; HND views of the same memory layout would be a copy,
            # so give SDPA its own HND tensors of the same size.
            ks_t = [k.permute(1, 0, 2).contiguous().unsqueeze(0) for k in ks]
            vs_t = [v.permute(1, 0, 2).contiguous().unsqueeze(0) for v in vs]
            q_t = q.view(1, hq, 1, d)
            batch = sets * max(1, 8 // sets)
            res = {"num_qo_heads": hq, "num_kv_heads": hkv, "head_dim": d, "kv_len": n}
            res["attnjit_us"] = time_graph(lambda i: attnjit.single_decode_with_kv_cache(q, ks[i % sets], vs[i % sets]), batch)
            for name, backend in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                                  ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
                try:
                    with sdpa_kernel([backend]):
                        res[f"sdpa_{name}_us"] = time_graph(
                            lambda i: F.scaled_dot_product_attention(q_t, ks_t[i % sets], vs_t[i % sets], enable_gqa=True), batch)
                except Exception as e:  # a backend that refuses this shape
                    res[f"sdpa_{name}_us"] = None
                    res[f"sdpa_{name}_error"] = str(e).splitlines()[0][:200]
            cells = []
            for key in ["attnjit_us", "sdpa_flash_us", "sdpa_cudnn_us", "sdpa_efficient_us"]:
                us = res[key]
                if us is None:
                    cells.append(f"{'n/a':>22}")
                else:
                    ratio = 2.0 * kv_bytes / (us * 1e-6) / copy
                    res[key.replace("_us", "_ratio_to_copy")] = ratio
                    cells.append(f"{us:>13.1f} | {ratio:>5.2f}")
            print(f"{hq:>4} {hkv:>4} {n:>7} " + "".join(cells))
            rows.append(res)
            del ks, vs, ks_t, vs_t
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_bytes_per_s": copy, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()

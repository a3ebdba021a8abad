"""Runs one decode shape a few times, for a profiler to attribute time per kernel:
    ncu --clock-control none --metrics gpu__time_duration.sum -k regex:attnjit \
        python3 tools/bench/profile_decode.py --hq 32 --hkv 8 --kv-len 32768
"""
import argparse

import torch

import attnjit

ap = argparse.ArgumentParser()
ap.add_argument("--hq", type=int, default=32)
ap.add_argument("--hkv", type=int, default=8)
ap.add_argument("--kv-len", type=int, default=32768)
ap.add_argument("--head-dim", type=int, default=128)
ap.add_argument("--iters", type=int, default=5)
args = ap.parse_args()
q = torch.randn(args.hq, args.head_dim, dtype=torch.bfloat16, device="cuda")
k = torch.randn(args.kv_len, args.hkv, args.head_dim, dtype=torch.bfloat16, device="cuda")
v = torch.randn_like(k)
for _ in range(args.iters):
    attnjit.single_decode_with_kv_cache(q, k, v)
torch.cuda.synchronize()

"""Runs one ragged batch prefill a few times, from attnjit or FlashInfer's
fa2 backend, on FlashAttention's grid shape (16k tokens, bf16, 2048 / d
heads), for ncu to profile the two kernels on the same inputs (nothing here
is timed):

    ncu --clock-control none --set full -k regex:attnjit --launch-skip 2 --launch-count 1 \
        python3 tools/bench/profile_prefill_peers.py --who attnjit --seq 512

--who flashinfer profiles FlashInfer's kernel (-k regex:BatchPrefill).
"""
import argparse

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--who", required=True, choices=["attnjit", "flashinfer"])
ap.add_argument("--seq", type=int, default=512)
ap.add_argument("--head-dim", type=int, default=128)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--iters", type=int, default=4)
args = ap.parse_args()

d, n = args.head_dim, args.seq
batch, heads = 16384 // n, 2048 // d
gen = torch.Generator(device="cuda").manual_seed(0)
q, k, v = (torch.randn(batch * n, heads, d, dtype=torch.bfloat16, device="cuda", generator=gen) for _ in range(3))
indptr = torch.arange(0, batch * n + 1, n, dtype=torch.int32, device="cuda")
ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
if args.who == "attnjit":
    import attnjit
    w = attnjit.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")
else:
    import flashinfer
    w = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", backend="fa2")
w.plan(indptr, indptr, heads, heads, d, causal=args.causal, q_data_type=torch.bfloat16)
for _ in range(args.iters):
    w.run(q, k, v)
torch.cuda.synchronize()

"""Runs one paged batch decode a few times, from attnjit or FlashInfer's
tensor-core decode (use_tensor_cores=True, which runs FlashInfer's paged
prefill kernel), for ncu to profile the two kernels on the same inputs
(nothing here is timed). The shapes are tools/bench/compare_peers.py's
batch-decode rows: 32 q / 8 kv heads, d 128, bf16, page_size 16, the pages
shuffled in memory, the cache one [pages, 2, page_size, kv_heads, head_dim]
tensor (NHD):

    ncu --clock-control none --set full -k regex:attnjit_single_decode --launch-skip 2 --launch-count 1 \
        python3 tools/bench/profile_batch_decode.py --who attnjit --shape 256x1024

--shape 256x1024: 256 requests of 1024 tokens; --shape skewed: one request
of 32768 and 63 of 512; --shape 64x4096 and 64x4096-fp8: 64 of 4096, the
second with fp8 e4m3 K/V (compare_peers.py's fp8 row). attnjit's batch decode runs its decode kernel
(attnjit_single_decode, paged source), which also merges a split request's
chunks (the plan has the lengths on the host); --who flashinfer profiles FlashInfer's kernel
(-k regex:'BatchDecode|Prefill'). plan() runs once, run() --iters times.
The attnjit plan's description (kernels, grid, split) goes to stderr.
tools/gpu/profile_batch_decode.sh runs this under ncu for both libraries.
"""
import argparse
import sys

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--who", required=True, choices=["attnjit", "flashinfer"])
ap.add_argument("--shape", default="256x1024", choices=["256x1024", "skewed", "64x4096", "64x4096-fp8"])
ap.add_argument("--iters", type=int, default=4)
args = ap.parse_args()

hq, hkv, d, page = 32, 8, 128, 16
lens = {"256x1024": [1024] * 256, "skewed": [32768] + [512] * 63}.get(args.shape, [4096] * 64)
kv_dtype = torch.float8_e4m3fn if args.shape.endswith("-fp8") else torch.bfloat16
batch = len(lens)
pages_per = [(n + page - 1) // page for n in lens]
num_pages = sum(pages_per)
gen = torch.Generator(device="cuda").manual_seed(0)
indptr = torch.tensor([0] + torch.tensor(pages_per).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
last = torch.tensor([n - (p - 1) * page for n, p in zip(lens, pages_per)], dtype=torch.int32, device="cuda")
indices = torch.randperm(num_pages, device="cuda", generator=gen).to(torch.int32)  # pages scattered in memory
cache = torch.randn(num_pages, 2, page, hkv, d, dtype=torch.bfloat16, device="cuda", generator=gen).to(kv_dtype)
q = torch.randn(batch, hq, d, dtype=torch.bfloat16, device="cuda", generator=gen)
out = torch.empty(batch, hq, d, dtype=torch.bfloat16, device="cuda")
ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
plan_args = dict(num_qo_heads=hq, num_kv_heads=hkv, head_dim=d, page_size=page, q_data_type=torch.bfloat16,
                 kv_data_type=kv_dtype)
if args.who == "attnjit":
    import attnjit

    w = attnjit.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
    w.plan(indptr, indices, last, **plan_args)
    print(f"attnjit plan {args.shape}: {w.plan_handle.describe()}", file=sys.stderr)
    call = lambda: w.run(q, cache, out=out)  # noqa: E731
else:
    import flashinfer

    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
    w.plan(indptr, indices, last, **plan_args)
    call = lambda: w.run(q, cache)  # noqa: E731
for _ in range(args.iters):
    call()
torch.cuda.synchronize()

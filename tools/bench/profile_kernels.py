"""Runs the shapes we profile, a few times each, for ncu to attribute time per
kernel (ncu attaches to this process; nothing here is timed):

    ncu --clock-control none --set full -k regex:attnjit --launch-skip 2 --launch-count 1 \
        python3 tools/bench/profile_kernels.py --case prefill_causal

Cases: prefill (d128, 4096 tokens, 16 heads, non-causal), prefill_causal,
decode_bf16 and decode_fp8 (paged batch decode, 64 requests of 4096, 32/8
heads, page 16: the rows of docs/PERFORMANCE.md).
"""
import argparse

import torch

import attnjit

ap = argparse.ArgumentParser()
ap.add_argument("--case", required=True, choices=["prefill", "prefill_causal", "decode_bf16", "decode_fp8"])
ap.add_argument("--iters", type=int, default=4)
ap.add_argument("--seq", type=int, default=4096)
ap.add_argument("--head-dim", type=int, default=128)
args = ap.parse_args()
dev = "cuda"


def prefill(causal):
    heads = 2048 // args.head_dim
    q = torch.randn(args.seq, heads, args.head_dim, dtype=torch.bfloat16, device=dev)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    for _ in range(args.iters):
        attnjit.single_prefill_with_kv_cache(q, k, v, causal=causal)


def decode(kv_dtype):
    batch, length, page, hq, hkv, d = 64, 4096, 16, 32, 8, 128
    pages = batch * length // page
    kv = torch.randn(pages, 2, page, hkv, d, device=dev).to(kv_dtype)
    indptr = torch.arange(0, pages + 1, length // page, dtype=torch.int32, device=dev)
    indices = torch.randperm(pages, device=dev).to(torch.int32)
    last = torch.full((batch,), page, dtype=torch.int32, device=dev)
    q = torch.randn(batch, hq, d, dtype=torch.bfloat16, device=dev)
    w = attnjit.BatchDecodeWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device=dev),
                                                   use_tensor_cores=True)
    w.plan(indptr, indices, last, hq, hkv, d, page, q_data_type=torch.bfloat16, kv_data_type=kv_dtype)
    for _ in range(args.iters):
        w.run(q, kv)


if args.case.startswith("prefill"):
    prefill(args.case == "prefill_causal")
else:
    decode(torch.bfloat16 if args.case == "decode_bf16" else torch.float8_e4m3fn)
torch.cuda.synchronize()

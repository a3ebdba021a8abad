"""Runs one ragged batch prefill a few times, from attnjit or FlashInfer's
fa2 backend, on FlashAttention's grid shape (16k tokens, bf16, 2048 / d
heads), for ncu to profile the two kernels on the same inputs (nothing here
is timed):

    ncu --clock-control none --set full -k regex:attnjit --launch-skip 2 --launch-count 1 \
        python3 tools/bench/profile_prefill_peers.py --who attnjit --seq 512

--who flashinfer profiles FlashInfer's kernel (-k regex:BatchPrefill).
--paged: the same shape through the paged wrappers (page size 16, pages
shuffled in memory), to set paged against ragged. --single: one request of
--seq tokens through single_prefill_with_kv_cache (the single prefill grid's
shape; ncu -k regex:SinglePrefill for FlashInfer's kernel).
"""
import argparse

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--who", required=True, choices=["attnjit", "flashinfer"])
ap.add_argument("--seq", type=int, default=512)
ap.add_argument("--head-dim", type=int, default=128)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--iters", type=int, default=4)
ap.add_argument("--paged", action="store_true")
ap.add_argument("--single", action="store_true")
args = ap.parse_args()

d, n = args.head_dim, args.seq
batch, heads = (1 if args.single else 16384 // n), 2048 // d
gen = torch.Generator(device="cuda").manual_seed(0)
q, k, v = (torch.randn(batch * n, heads, d, dtype=torch.bfloat16, device="cuda", generator=gen) for _ in range(3))
indptr = torch.arange(0, batch * n + 1, n, dtype=torch.int32, device="cuda")
ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
if args.who == "attnjit":
    import attnjit as lib
    kw = {}
else:
    import flashinfer as lib
    kw = {"backend": "fa2"}
if args.single:
    def call():
        lib.single_prefill_with_kv_cache(q, k, v, causal=args.causal, **kw)
elif args.paged:
    page = 16
    num_pages = batch * n // page
    perm = torch.randperm(num_pages, device="cuda", generator=gen).to(torch.int32)
    k_cache = torch.empty(num_pages, page, heads, d, dtype=torch.bfloat16, device="cuda")
    v_cache = torch.empty_like(k_cache)
    k_cache[perm.long()] = k.view(num_pages, page, heads, d)
    v_cache[perm.long()] = v.view(num_pages, page, heads, d)
    kv_indptr = torch.arange(0, num_pages + 1, n // page, dtype=torch.int32, device="cuda")
    last = torch.full((batch,), page, dtype=torch.int32, device="cuda")
    w = lib.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", **kw)
    w.plan(indptr, kv_indptr, perm, last, heads, heads, d, page, causal=args.causal, q_data_type=torch.bfloat16)
    kv = ((k_cache, v_cache),)
    call = lambda: w.run(q, *kv)  # noqa: E731
else:
    w = lib.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", **kw)
    w.plan(indptr, indptr, heads, heads, d, causal=args.causal, q_data_type=torch.bfloat16)
    kv = (k, v)
    call = lambda: w.run(q, *kv)  # noqa: E731
for _ in range(args.iters):
    call()
torch.cuda.synchronize()

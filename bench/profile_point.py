"""Runs one benchmark point a few times, from attnjit or FlashInfer on the same
inputs, for ncu to profile (nothing here is timed); tools/gpu/profile.sh runs it:

    ncu --clock-control none --set full -k regex:attnjit --launch-skip 2 --launch-count 1 \\
        python3 bench/profile_point.py batch_decode --shape 256x1024 --who attnjit

Points (32 q / 8 kv heads, d 128, bf16 unless said):
  batch_decode  --shape 256x1024 | skewed (1 x 32768 + 63 x 512) | 64x4096 | 64x4096-fp8 (e4m3 K/V):
                compare_peers.py's batch-decode rows, page_size 16, pages shuffled in memory, the cache one
                [pages, 2, page_size, kv_heads, head_dim] tensor (NHD), tensor-core paths. attnjit's plan
                description goes to stderr. FlashInfer's kernel: -k regex:'BatchDecode|Prefill'.
  single_decode --kv-len, --hq, --hkv, --head-dim: one request through single_decode_with_kv_cache.
  prefill       FlashAttention's grid shape: 16k tokens in --seq-long requests, 2048 / --head-dim heads,
                ragged (default), --paged (page 16, shuffled) or --single (one request of --seq tokens;
                --fp8: e4m3 q/K/V with per-head scales, bf16 output);
                --causal; --backend (FlashInfer's default fa2: -k regex:BatchPrefill, or SinglePrefill;
                fa3: -k regex:PrefillWithKVCacheKernel).
  masked_prefill --mask document | window [--twin]: user_variant_speed.py's FlexAttention shape (16k tokens,
                16 heads, d 128): its mask_mod snippet, block-sparse with reclassify="on_bind" (the classes kept,
                so the profiled launches are the attention kernel's), through single prefill; --twin: the
                built-in twin instead (documents as a ragged causal batch; the window as window_left). attnjit only.
"""
import argparse
import sys

import torch

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("op", choices=["batch_decode", "single_decode", "prefill", "masked_prefill"])
ap.add_argument("--who", default="attnjit", choices=["attnjit", "flashinfer"])
ap.add_argument("--iters", type=int, default=4, help="calls after the plan (ncu's --launch-skip counts them)")
ap.add_argument("--shape", default="256x1024", choices=["256x1024", "skewed", "64x4096", "64x4096-fp8"],
                help="batch_decode: the batch")
ap.add_argument("--kv-len", type=int, default=32768, help="single_decode: keys")
ap.add_argument("--hq", type=int, default=32, help="single_decode: query heads")
ap.add_argument("--hkv", type=int, default=8, help="single_decode: KV heads")
ap.add_argument("--head-dim", type=int, default=128)
ap.add_argument("--seq", type=int, default=512, help="prefill: tokens per request")
ap.add_argument("--causal", action="store_true", help="prefill: causal mask")
ap.add_argument("--backend", help="prefill: the backend (default: attnjit's auto, FlashInfer's fa2)")
ap.add_argument("--mask", default="document", choices=["document", "window"], help="masked_prefill: the mask")
ap.add_argument("--twin", action="store_true", help="masked_prefill: the built-in twin instead of the snippet")
where = ap.add_mutually_exclusive_group()
where.add_argument("--paged", action="store_true", help="prefill: the paged wrappers")
where.add_argument("--single", action="store_true", help="prefill: one request, single_prefill_with_kv_cache")
ap.add_argument("--fp8", action="store_true",
                help="prefill --single: q, K and V e4m3 with per-head scales (scale_q/k/v), output bf16")
args = ap.parse_args()
if args.op != "prefill" and (args.paged or args.single or args.causal):
    ap.error(f"--paged, --single and --causal are prefill's; op is {args.op}")
if args.fp8 and not (args.op == "prefill" and args.single):
    ap.error("--fp8 is prefill --single's")
if args.op == "masked_prefill" and args.who != "attnjit":
    ap.error("masked_prefill is attnjit's (FlexAttention has no ncu-friendly single kernel here)")
for name in ("iters", "kv_len", "hq", "hkv", "head_dim", "seq"):
    if getattr(args, name) < 1:
        ap.error(f"--{name.replace('_', '-')}={getattr(args, name)} must be at least 1")

if args.who == "attnjit":
    import attnjit as lib
else:
    import flashinfer as lib
dev = "cuda"
gen = torch.Generator(device=dev).manual_seed(0)


def batch_decode():
    hq, hkv, d, page = 32, 8, args.head_dim, 16
    lens = {"256x1024": [1024] * 256, "skewed": [32768] + [512] * 63}.get(args.shape, [4096] * 64)
    kv_dtype = torch.float8_e4m3fn if args.shape.endswith("-fp8") else torch.bfloat16
    pages_per = [(n + page - 1) // page for n in lens]
    num_pages = sum(pages_per)
    indptr = torch.tensor([0] + torch.tensor(pages_per).cumsum(0).tolist(), dtype=torch.int32, device=dev)
    last = torch.tensor([n - (p - 1) * page for n, p in zip(lens, pages_per)], dtype=torch.int32, device=dev)
    indices = torch.randperm(num_pages, device=dev, generator=gen).to(torch.int32)  # pages scattered in memory
    cache = torch.randn(num_pages, 2, page, hkv, d, dtype=torch.bfloat16, device=dev, generator=gen).to(kv_dtype)
    q = torch.randn(len(lens), hq, d, dtype=torch.bfloat16, device=dev, generator=gen)
    ws = torch.empty(128 << 20, dtype=torch.uint8, device=dev)
    w = lib.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
    w.plan(indptr, indices, last, num_qo_heads=hq, num_kv_heads=hkv, head_dim=d, page_size=page,
           q_data_type=torch.bfloat16, kv_data_type=kv_dtype)
    if args.who == "attnjit":
        print(f"attnjit plan {args.shape}: {w.plan_handle.describe()}", file=sys.stderr)
    return lambda: w.run(q, cache)


def single_decode():
    q = torch.randn(args.hq, args.head_dim, dtype=torch.bfloat16, device=dev, generator=gen)
    k = torch.randn(args.kv_len, args.hkv, args.head_dim, dtype=torch.bfloat16, device=dev, generator=gen)
    v = torch.randn_like(k)
    return lambda: lib.single_decode_with_kv_cache(q, k, v)


def prefill():
    d, n = args.head_dim, args.seq
    batch, heads = (1 if args.single else max(1, 16384 // n)), 2048 // d
    q, k, v = (torch.randn(batch * n, heads, d, dtype=torch.bfloat16, device=dev, generator=gen) for _ in range(3))
    indptr = torch.arange(0, batch * n + 1, n, dtype=torch.int32, device=dev)
    ws = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    backend = args.backend or (None if args.who == "attnjit" else "fa2")
    kw = {} if backend is None else {"backend": backend}
    if args.single and args.fp8:
        scales = [0.5 + 1.5 * torch.rand(heads, device=dev, generator=gen) for _ in range(3)]
        q8, k8, v8 = ((t / s[None, :, None]).to(torch.float8_e4m3fn) for t, s in zip((q, k, v), scales))
        sq, sk, sv = scales
        return lambda: lib.single_prefill_with_kv_cache(q8, k8, v8, scale_q=sq, scale_k=sk, scale_v=sv,
                                                        o_dtype=torch.bfloat16, causal=args.causal, **kw)
    if args.single:
        return lambda: lib.single_prefill_with_kv_cache(q, k, v, causal=args.causal, **kw)
    if args.paged:
        page = 16
        if n % page:
            ap.error(f"--paged needs --seq a multiple of {page}; got {n}")
        num_pages = batch * n // page
        perm = torch.randperm(num_pages, device=dev, generator=gen).to(torch.int32)
        k_cache = torch.empty(num_pages, page, heads, d, dtype=torch.bfloat16, device=dev)
        v_cache = torch.empty_like(k_cache)
        k_cache[perm.long()] = k.view(num_pages, page, heads, d)
        v_cache[perm.long()] = v.view(num_pages, page, heads, d)
        kv_indptr = torch.arange(0, num_pages + 1, n // page, dtype=torch.int32, device=dev)
        last = torch.full((batch,), page, dtype=torch.int32, device=dev)
        w = lib.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", **kw)
        w.plan(indptr, kv_indptr, perm, last, heads, heads, d, page, causal=args.causal, q_data_type=torch.bfloat16)
        return lambda: w.run(q, (k_cache, v_cache))
    w = lib.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", **kw)
    w.plan(indptr, indptr, heads, heads, d, causal=args.causal, q_data_type=torch.bfloat16)
    return lambda: w.run(q, k, v)


def masked_prefill():
    import user_variant_speed as uvs  # beside this file: its snippets and shapes, so both profile the same thing

    T, H, D = uvs.FLEX["tokens"], uvs.FLEX["heads"], uvs.FLEX["head_dim"]
    q, k, v = (torch.randn(T, H, D, dtype=torch.bfloat16, device=dev, generator=gen) for _ in range(3))
    if args.mask == "document":
        lengths = uvs.document_lengths(T, uvs.FLEX["documents"])
        doc = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32), torch.tensor(lengths)).to(dev)
        values = {"doc": doc}
        if args.twin:
            indptr = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32, device=dev)
            w = lib.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device=dev), "NHD")
            w.plan(indptr, indptr, H, H, D, causal=True, q_data_type=torch.bfloat16)
            return lambda: w.run(q, k, v)
    else:
        values = {"offset": 0, "window": uvs.FLEX["window"]}
        if args.twin:
            return lambda: lib.single_prefill_with_kv_cache(q, k, v, causal=True, window_left=uvs.FLEX["window"])
    variant = uvs.make_variant(lib, args.mask, values, block_sparse=True, heads_vary=False, reclassify="on_bind")
    return lambda: lib.single_prefill_with_kv_cache(q, k, v, variant=variant)


call = {"batch_decode": batch_decode, "single_decode": single_decode, "prefill": prefill,
        "masked_prefill": masked_prefill}[args.op]()
for _ in range(args.iters):
    call()
torch.cuda.synchronize()

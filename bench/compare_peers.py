"""Decode: attnjit vs FlashInfer and PyTorch SDPA (flash, cuDNN), in one process.

Single decode (one request) and paged batch decode, bf16 (and fp8 KV for
batch decode), head_dim 128. Each contender is captured in a CUDA graph of
`iters` calls rotating over input sets that together exceed the L2 (replayed
after warm-up; median over replays), or, where capture fails, timed with CUDA
events around the same loop (the "how" column says which). Achieved KV bytes/s
is compared with a 1 GiB device-to-device copy measured in the same run
(bytes read + written, CUDA events, no graph: copy_rate says why).

SDPA has no paged form: for batches of equal lengths it runs the same
problem on a dense [B, Hkv, N, D] cache (a lower bound on what paging costs);
for skewed batches it is left out.

  PYTHONPATH=tools/python:/tmp/site ATTNJIT_LIBRARY=build/libattnjit.so \
      python3 bench/compare_peers.py --json out.json
"""
import argparse
import itertools
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import attnjit

try:
    import flashinfer
except Exception as e:  # reported in the output, the rest still runs
    flashinfer = None
    FLASHINFER_ERROR = repr(e)

L2_BYTES = 50 << 20
ROTATE_BYTES = 8 * L2_BYTES


def captured(fn, sets, iters):
    """The replay of fn(i)'s loop (i rotating over `sets` inputs) captured in a CUDA graph, or None where
    capture fails."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn(0)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(iters):
                fn(i % sets)
        g.replay()
        torch.cuda.synchronize()
        return g.replay
    except Exception:
        torch.cuda.synchronize()
        return None


# A spin long enough for the host to enqueue a plain call (cycles at about 2 GHz: 0.5 ms, several times
# the 70-90 us measured for a prefill call through the Python binding).
PLAIN_SPIN_CYCLES_PER_CALL = 1_000_000


def prepared(fn, sets, iters, graph=True):
    """(run, how): run() enqueues `iters` calls of fn(i), i rotating over `sets` inputs, as one CUDA graph
    replay unless graph=False (or capture fails), else as plain calls ("events")."""
    for i in range(3):
        fn(i % sets)  # warm-up: compiles, plans, first-touch
    torch.cuda.synchronize()
    run = captured(fn, sets, iters) if graph else None
    if run is not None:
        return run, "graph"

    def plain():
        for i in range(iters):
            fn(i % sets)
    plain.queued = True  # median_us queues its calls behind a spin, so the events time the device only
    return plain, "events"


def median_us(runs, iters, reps, warm=3, host=None):
    """Median microseconds per call of each run() in `runs` (name -> run, each `iters` calls), after `warm`
    calls of each; the contenders interleaved rep by rep, so that clock and thermal drift over a run falls on
    all of them alike. host (a dict), where given, gets the median host microseconds a call of each plain
    (queued) run took to enqueue: beside its device time it says whether the host or the device bounds it."""
    for _ in range(warm):
        for run in runs.values():
            run()
    torch.cuda.synchronize()
    times = {name: [] for name in runs}
    enqueue = {name: [] for name in runs if getattr(runs[name], "queued", False)}
    for _ in range(reps):
        for name, run in runs.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if name in enqueue:
                # Plain calls: the host enqueues them all while the device spins, so the events time the
                # device's work alone, as a graph replay's do. Without it the host's time to the first
                # launch (about 85 us for a single prefill with a user variant, H100) was counted as
                # device time: the block-sparse on_bind rows read 405 us a call for a 319 us kernel.
                torch.cuda._sleep(PLAIN_SPIN_CYCLES_PER_CALL * iters)
            a.record()
            t0 = time.perf_counter()
            run()
            if name in enqueue:
                enqueue[name].append((time.perf_counter() - t0) * 1e6 / iters)
            b.record()
            b.synchronize()
            times[name].append(a.elapsed_time(b) * 1000.0 / iters)
    if host is not None:
        host.update({name: statistics.median(t) for name, t in enqueue.items()})
    return {name: statistics.median(t) for name, t in times.items()}


def timed(fn, sets, iters=20, reps=15, graph=True):
    """Median microseconds per call of fn(i), i rotating over `sets` inputs (prepared, then median_us)."""
    run, how = prepared(fn, sets, iters, graph)
    return median_us({"x": run}, iters, reps)["x"], how


class Contenders:
    """The compute-bound rows' contenders on one input set: each added one is warmed up and captured at
    once (or its error kept), then measure() times them all interleaved (median_us) into res[name] as
    microseconds and TFLOP/s."""

    def __init__(self, res, flops, iters=5, reps=10):
        self.res, self.flops, self.iters, self.reps, self.runs, self.how = res, flops, iters, reps, {}, {}

    def add(self, name, fn):
        try:
            self.runs[name], self.how[name] = prepared(lambda i: fn(), 1, self.iters)
        except Exception as e:
            self.res[name] = {"error": f"{type(e).__name__}: {e}"[:300]}

    def error(self, name, e):
        self.res[name] = {"error": f"{type(e).__name__}: {e}"[:300]}

    def measure(self):
        for name, us in median_us(self.runs, self.iters, self.reps).items():
            self.res[name] = {"us": us, "how": self.how[name], "tflops": self.flops / (us * 1e-6) / 1e12}
        self.runs.clear()


def gemm_rate(n=8192, dtype=torch.bfloat16):
    """bf16 GEMM FLOP/s (torch.matmul, n x n x n): the prefill rows' ceiling in this run."""
    a = torch.randn(n, n, dtype=dtype, device="cuda")
    b = torch.randn(n, n, dtype=dtype, device="cuda")
    us, _ = timed(lambda i: torch.matmul(a, b), 1, iters=5, reps=10)
    return 2.0 * n ** 3 / (us * 1e-6)


def copy_rate():
    """A 1 GiB device-to-device copy (bytes read + written), timed with CUDA events outside any graph, as
    `attnjit bench` times its driver copy: captured in a graph the same copy measured about 1.5x slower on
    an H200 (2.77 against 4.2 TB/s), which would flatter every "x copy" ratio (issue 6)."""
    n = 1 << 30
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us, _ = timed(lambda i: dst.copy_(src), 1, iters=1, reps=20, graph=False)
    return 2.0 * n / (us * 1e-6)


def sets_for(bytes_per_set):
    return max(1, min(16, math.ceil(ROTATE_BYTES / bytes_per_set)))


def try_contender(results, name, fn, sets, kv_bytes, copy):
    try:
        us, how = timed(fn, sets)
        results[name] = {"us": us, "how": how, "x_copy": kv_bytes / (us * 1e-6) / copy}
    except Exception as e:  # one peer's failure must not hide the others
        results[name] = {"error": f"{type(e).__name__}: {e}"[:300]}


# ---------------------------------------------------------------- single decode
def bench_single(hq, hkv, n, copy, d=128, dtype=torch.bfloat16, kv_dtype=torch.bfloat16, peers=True, pos="NONE"):
    elem = torch.tensor([], dtype=kv_dtype).element_size()
    kv_bytes = 2 * n * hkv * d * elem
    sets = sets_for(kv_bytes)
    q = [torch.randn(hq, d, dtype=dtype, device="cuda") for _ in range(sets)]
    k = [torch.randn(n, hkv, d, dtype=dtype, device="cuda").to(kv_dtype) for _ in range(sets)]
    v = [torch.randn(n, hkv, d, dtype=dtype, device="cuda").to(kv_dtype) for _ in range(sets)]
    out = torch.empty(hq, d, dtype=dtype, device="cuda")
    res = {}

    w = attnjit.SingleDecodeWrapper()
    w.plan(q[0], k[0], v[0], pos_encoding_mode=pos)
    try_contender(res, "attnjit", lambda i: w.run(q[i], k[i], v[i], out=out), sets, kv_bytes, copy)
    if flashinfer is not None and peers:
        for tc in (False, True):
            try_contender(res, f"flashinfer{' tc' if tc else ''}",
                          lambda i, tc=tc: flashinfer.single_decode_with_kv_cache(q[i], k[i], v[i], use_tensor_cores=tc,
                                                                                 pos_encoding_mode=pos),
                          sets, kv_bytes, copy)
    if kv_dtype != dtype or not peers or pos != "NONE":  # SDPA has no fp8 K/V and no RoPE
        return {"op": "single_decode", "num_qo_heads": hq, "num_kv_heads": hkv, "kv_len": n, "kv_bytes": kv_bytes,
                "kv_dtype": str(kv_dtype).replace("torch.", ""), "pos_encoding_mode": pos, "results": res}
    # SDPA: [1, H, 1, D] against [1, Hkv, N, D] (HND views of the same data).
    qs = [x.view(1, hq, 1, d) for x in q]
    ks = [x.permute(1, 0, 2).unsqueeze(0) for x in k]
    vs = [x.permute(1, 0, 2).unsqueeze(0) for x in v]
    for backend, label in ((SDPBackend.FLASH_ATTENTION, "sdpa flash"), (SDPBackend.CUDNN_ATTENTION, "sdpa cudnn")):
        def call(i, backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qs[i], ks[i], vs[i], enable_gqa=hq != hkv)
        try_contender(res, label, call, sets, kv_bytes, copy)
    return {"op": "single_decode", "num_qo_heads": hq, "num_kv_heads": hkv, "kv_len": n, "kv_bytes": kv_bytes,
            "results": res}


# ----------------------------------------------------------------- batch decode
def bench_batch(hq, hkv, lens, copy, d=128, page=16, kv_dtype=torch.bfloat16, q_dtype=torch.bfloat16, peers=True,
                pos="NONE"):
    B = len(lens)
    pages_per = [(n + page - 1) // page for n in lens]
    num_pages = sum(pages_per)
    elem = torch.tensor([], dtype=kv_dtype).element_size()
    kv_bytes = 2 * sum(lens) * hkv * d * elem
    sets = sets_for(num_pages * page * hkv * d * 2 * elem)
    indptr = torch.tensor([0] + list(torch.tensor(pages_per).cumsum(0).tolist()), dtype=torch.int32, device="cuda")
    last = torch.tensor([n - (p - 1) * page for n, p in zip(lens, pages_per)], dtype=torch.int32, device="cuda")
    indices = torch.randperm(num_pages, device="cuda").to(torch.int32)  # pages scattered in memory
    caches = []
    for _ in range(sets):
        c = torch.randn(num_pages, 2, page, hkv, d, dtype=torch.bfloat16, device="cuda")
        caches.append(c.to(kv_dtype))
    q = [torch.randn(B, hq, d, dtype=q_dtype, device="cuda") for _ in range(sets)]
    out = torch.empty(B, hq, d, dtype=q_dtype, device="cuda")
    res = {}
    plan_args = dict(num_qo_heads=hq, num_kv_heads=hkv, head_dim=d, page_size=page, q_data_type=q_dtype,
                     kv_data_type=kv_dtype, pos_encoding_mode=pos)

    for tc in (True, False):
        ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
        try:
            w = attnjit.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tc)
            w.plan(indptr, indices, last, **plan_args)
            try_contender(res, f"attnjit{' tc' if tc else ''}", lambda i, w=w: w.run(q[i], caches[i], out=out), sets,
                          kv_bytes, copy)
        except Exception as e:
            res[f"attnjit{' tc' if tc else ''}"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    if flashinfer is not None and peers:
        for tc in (True, False):
            ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
            try:
                w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tc)
                w.plan(indptr, indices, last, **plan_args)
                try_contender(res, f"flashinfer{' tc' if tc else ''}", lambda i, w=w: w.run(q[i], caches[i]), sets,
                              kv_bytes, copy)
            except Exception as e:
                res[f"flashinfer{' tc' if tc else ''}"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    if peers and len(set(lens)) == 1 and kv_dtype in (torch.bfloat16, torch.float16) and pos == "NONE":
        n = lens[0]
        dense_sets = sets_for(2 * B * n * hkv * d * elem)
        qs = [torch.randn(B, hq, 1, d, dtype=q_dtype, device="cuda") for _ in range(dense_sets)]
        ks = [torch.randn(B, hkv, n, d, dtype=kv_dtype, device="cuda") for _ in range(dense_sets)]
        vs = [torch.randn(B, hkv, n, d, dtype=kv_dtype, device="cuda") for _ in range(dense_sets)]
        for backend, label in ((SDPBackend.FLASH_ATTENTION, "sdpa flash (dense)"),
                               (SDPBackend.CUDNN_ATTENTION, "sdpa cudnn (dense)")):
            def call(i, backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(qs[i], ks[i], vs[i], enable_gqa=hq != hkv)
            try_contender(res, label, call, dense_sets, kv_bytes, copy)
        del qs, ks, vs
    groups = [(len(list(g)), n) for n, g in itertools.groupby(lens)]  # runs of equal lengths
    label = " + ".join(f"{c} x {n}" for c, n in groups)
    if len(groups) > 1:
        label = "skewed " + label
    del caches
    torch.cuda.empty_cache()
    return {"op": "batch_decode", "batch": label, "num_qo_heads": hq, "num_kv_heads": hkv, "page_size": page,
            "kv_dtype": str(kv_dtype).replace("torch.", ""), "pos_encoding_mode": pos, "kv_bytes": kv_bytes,
            "results": res}


def bench_speculative(hq, hkv, lens, copy, d=128, page=16, q_lens=(1, 4)):
    """TensorRT-LLM-style batch decode (block tables, NHD) at q_len_per_req 1 and 4 on the same cache: the
    bytes are the same, so issue 6 asks 4 tokens to cost at most 1.3x the time of one. attnjit only:
    FlashInfer's trtllm-gen kernels need Blackwell and its decode wrapper takes one token."""
    B = len(lens)
    pages_per = [(n + page - 1) // page for n in lens]
    num_pages = sum(pages_per)
    kv_bytes = 2 * sum(lens) * hkv * d * 2
    sets = sets_for(num_pages * page * hkv * d * 2 * 2)
    perm = torch.randperm(num_pages, device="cuda").to(torch.int32)  # pages scattered in memory
    tables = torch.zeros(B, max(pages_per), dtype=torch.int32, device="cuda")
    at = 0
    for b, n in enumerate(pages_per):
        tables[b, :n] = perm[at:at + n]
        at += n
    seq_lens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    caches = [torch.randn(num_pages, 2, page, hkv, d, dtype=torch.bfloat16, device="cuda") for _ in range(sets)]
    ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    res = {}
    for ql in q_lens:
        q = [torch.randn(B * ql, hq, d, dtype=torch.bfloat16, device="cuda") for _ in range(sets)]
        out = torch.empty(B * ql, hq, d, dtype=torch.bfloat16, device="cuda")

        def call(i, q=q, out=out, ql=ql):
            return attnjit.trtllm_batch_decode_with_kv_cache(q[i], caches[i], ws, tables, seq_lens, max(lens),
                                                             bmm1_scale=d ** -0.5, out=out, kv_layout="NHD",
                                                             q_len_per_req=ql)
        try_contender(res, f"attnjit q_len_per_req {ql}", call, sets, kv_bytes, copy)
    del caches
    torch.cuda.empty_cache()
    return {"op": "speculative_decode", "batch": f"{B} x {lens[0]}", "num_qo_heads": hq, "num_kv_heads": hkv,
            "page_size": page, "kv_bytes": kv_bytes, "results": res}


# ---------------------------------------------------------------- single prefill
def add_sdpa(c, qs, ks, vs, causal):
    """SDPA's flash and cuDNN backends on [b, h, s, d] tensors, as Contenders c."""
    for backend, label in ((SDPBackend.FLASH_ATTENTION, "sdpa flash"), (SDPBackend.CUDNN_ATTENTION, "sdpa cudnn")):
        def call(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
        c.add(label, call)


def bench_prefill(h, n, causal, copy, d=128, dtype=torch.bfloat16, with_flashinfer=True, backend="auto"):
    """TFLOP/s on one request of n query and n KV tokens (causal counts half), h heads; attnjit with
    `backend` ("auto": the planner's choice)."""
    flops = 4.0 * n * n * h * d * (0.5 if causal else 1.0)
    q = torch.randn(n, h, d, dtype=dtype, device="cuda")
    k = torch.randn(n, h, d, dtype=dtype, device="cuda")
    v = torch.randn(n, h, d, dtype=dtype, device="cuda")
    res = {}
    c = Contenders(res, flops)
    c.add("attnjit", lambda: attnjit.single_prefill_with_kv_cache(q, k, v, causal=causal, backend=backend))
    if flashinfer is not None and with_flashinfer:
        c.add("flashinfer fa2", lambda: flashinfer.single_prefill_with_kv_cache(q, k, v, causal=causal, backend="fa2"))
    add_sdpa(c, *(x.transpose(0, 1).unsqueeze(0) for x in (q, k, v)), causal)
    c.measure()
    return {"op": "single_prefill", "head_dim": d, "heads": h, "qo_len": n, "kv_len": n, "causal": causal, "results": res}


# ------------------------------------------------- batch prefill, FlashAttention's grid
def bench_prefill_grid(d, seqlen, causal, with_flashinfer, dtype=torch.bfloat16, tokens=16384):
    """FlashAttention's benchmark: 16k tokens per batch (batch = tokens / seqlen), 2048 / d heads,
    TFLOP/s = 4 b h s^2 d, halved for causal. attnjit and FlashInfer through their ragged
    wrappers (plan once, then run); SDPA on [b, h, s, d]."""
    b, h = tokens // seqlen, 2048 // d
    flops = 4.0 * b * h * seqlen * seqlen * d * (0.5 if causal else 1.0)
    q = torch.randn(b * seqlen, h, d, dtype=dtype, device="cuda")
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    indptr = torch.arange(0, b * seqlen + 1, seqlen, dtype=torch.int32, device="cuda")
    res = {}
    c = Contenders(res, flops)

    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    try:
        w = attnjit.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")
        w.plan(indptr, indptr, h, h, d, causal=causal, q_data_type=dtype)
        c.add("attnjit", lambda: w.run(q, k, v))
    except Exception as e:
        c.error("attnjit", e)
    if flashinfer is not None and with_flashinfer:
        fws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        try:
            fw = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(fws, "NHD", backend="fa2")
            fw.plan(indptr, indptr, h, h, d, causal=causal, q_data_type=dtype)
            c.add("flashinfer fa2", lambda: fw.run(q, k, v))
        except Exception as e:
            c.error("flashinfer fa2", e)
    add_sdpa(c, *(x.view(b, seqlen, h, d).transpose(1, 2) for x in (q, k, v)), causal)
    c.measure()
    return {"op": "batch_prefill", "head_dim": d, "heads": h, "batch": b, "seqlen": seqlen, "causal": causal,
            "results": res}


# ------------------------------------------- paged prefill: append, and paged vs ragged
def paged_arrays(qo_lens, kv_lens, page, gen):
    """qo_indptr, page indptr, shuffled page ids and last-page lengths (host int32) for the requests."""
    pages = [-(-kv // page) for kv in kv_lens]
    ids = torch.randperm(sum(pages), generator=gen).int()
    qo_indptr = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
    kv_indptr = torch.tensor([0] + list(torch.tensor(pages).cumsum(0)), dtype=torch.int32)
    last = torch.tensor([kv - (p - 1) * page for kv, p in zip(kv_lens, pages)], dtype=torch.int32)
    return qo_indptr, kv_indptr, ids, last


def bench_paged_prefill(label, qo_lens, kv_lens, h, hk, causal, with_flashinfer, d=128, page=16,
                        dtype=torch.bfloat16):
    """TFLOP/s (visible (query, key) pairs, causal aligned to the KV's end) of paged prefill at page_size 16
    with shuffled pages: attnjit (and its CUDA-graph mode), FlashInfer fa2 paged, and attnjit's ragged
    wrapper on the same K/V stored contiguously (the paged-vs-ragged target)."""
    # Query i of qo sits at kv - qo + i and sees kv - qo + i + 1 keys when causal.
    pairs = sum(q * kv - (q * (q - 1) // 2 if causal else 0) for q, kv in zip(qo_lens, kv_lens))
    flops = 4.0 * pairs * h * d
    gen = torch.Generator().manual_seed(0)
    qo_indptr, kv_indptr, ids, last = paged_arrays(qo_lens, kv_lens, page, gen)
    q = torch.randn(int(qo_indptr[-1]), h, d, dtype=dtype, device="cuda")
    cache = torch.randn(int(kv_indptr[-1]), 2, page, hk, d, dtype=dtype, device="cuda")
    plan_args = (qo_indptr, kv_indptr, ids, last, h, hk, d, page)
    res = {}
    c = Contenders(res, flops)
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    try:
        w = attnjit.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
        w.plan(*plan_args, causal=causal, q_data_type=dtype)
        c.add("attnjit paged", lambda: w.run(q, cache))
    except Exception as e:
        c.error("attnjit paged", e)
    try:
        batch = len(qo_lens)
        bufs = dict(qo_indptr_buf=torch.empty(batch + 1, dtype=torch.int32, device="cuda"),
                    paged_kv_indptr_buf=torch.empty(batch + 1, dtype=torch.int32, device="cuda"),
                    paged_kv_indices_buf=torch.empty(len(ids), dtype=torch.int32, device="cuda"),
                    paged_kv_last_page_len_buf=torch.empty(batch, dtype=torch.int32, device="cuda"))
        gw = attnjit.BatchPrefillWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"),
                                                         "NHD", use_cuda_graph=True, **bufs)
        gw.plan(*plan_args, causal=causal, q_data_type=dtype)
        c.add("attnjit paged cuda-graph mode", lambda: gw.run(q, cache))
    except Exception as e:
        c.error("attnjit paged cuda-graph mode", e)
    # FlashInfer's paged wrapper on both of its backends (fa3: issue 30's append target is against it; its
    # plan() JIT-builds the module, about a minute on the device's first run).
    for backend in (("fa2", "fa3") if flashinfer is not None and with_flashinfer else ()):
        try:
            fw = flashinfer.BatchPrefillWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8,
                                                                            device="cuda"), "NHD", backend=backend)
            fw.plan(*(x.cuda() if isinstance(x, torch.Tensor) else x for x in plan_args), causal=causal,
                    q_data_type=dtype)
            c.add(f"flashinfer {backend} paged", lambda fw=fw: fw.run(q, cache))
        except Exception as e:
            c.error(f"flashinfer {backend} paged", e)
    # Ragged on the same rows, gathered into contiguous K/V.
    rows = []
    for b in range(len(kv_lens)):
        pages = cache[ids[kv_indptr[b]:kv_indptr[b + 1]].long().cuda()]
        rows.append(pages.transpose(1, 2).reshape(-1, 2, hk, d)[:kv_lens[b]])  # [tokens, 2, hk, d]
    kv = torch.cat(rows)
    k, v = kv[:, 0].contiguous(), kv[:, 1].contiguous()
    del kv, rows
    kv_rows = torch.tensor([0] + list(torch.tensor(kv_lens).cumsum(0)), dtype=torch.int32)
    try:
        rw = attnjit.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"),
                                                          "NHD")
        rw.plan(qo_indptr, kv_rows, h, hk, d, causal=causal, q_data_type=dtype)
        c.add("attnjit ragged", lambda: rw.run(q, k, v))
    except Exception as e:
        c.error("attnjit ragged", e)
    c.measure()
    return {"op": "paged_prefill", "case": label, "heads": h, "kv_heads": hk, "head_dim": d, "page_size": page,
            "causal": causal, "results": res}


def shape_lens(shape):
    """A batch's KV lengths from BxN, or groups joined by + (1x32768+63x512)."""
    return [int(n) for g in shape.split("+") for b, n in [g.split("x")] for _ in range(int(b))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--only", choices=["single", "batch", "prefill", "prefill_grid", "paged"], default=None)
    ap.add_argument("--rope", action="store_true",
                    help="decode rows with pos_encoding_mode ROPE_LLAMA instead of issue 6's (attnjit and FlashInfer; "
                         "SDPA has no RoPE): single 32 / 8 and 32 / 4 at 32k, batch 64 x 4096 and 256 x 1024, bf16 and fp8")
    ap.add_argument("--batch-shapes", default=None,
                    help="batch decode rows to run instead of issue 6's (bf16, 32 / 8 heads): comma-separated "
                         "batches, each BxN or groups joined by + (1x32768+63x512: the skewed batch)")
    ap.add_argument("--trtllm-shapes", default=None,
                    help="TensorRT-LLM-style batch decode rows (block tables, lengths on the device), attnjit only, "
                         "instead of issue 6's rows: comma-separated BxN")
    ap.add_argument("--attnjit-only", action="store_true",
                    help="decode rows (single and batch) without FlashInfer and SDPA (an A/B of attnjit builds)")
    ap.add_argument("--grid-head-dims", default="64,128,256", help="head dims of the prefill grid")
    ap.add_argument("--attnjit-backend", default="auto", choices=["auto", "fa2", "fa3"],
                    help="attnjit's prefill backend in the single prefill rows")
    ap.add_argument("--grid-seqlens", default="512,1024,2048,4096,8192,16384",
                    help="sequence lengths of the prefill grid (batch prefill and single prefill)")
    ap.add_argument("--flashinfer-head-dims", default="64,128,256",
                    help="head dims at which FlashInfer runs in the prefill grid (each one is an nvcc JIT compile)")
    args = ap.parse_args()
    torch.manual_seed(0)
    copy = copy_rate()
    print(f"device: {torch.cuda.get_device_name()}  copy (read+write): {copy / 1e9:.0f} GB/s  "
          f"flashinfer: {flashinfer.__version__ if flashinfer else 'unavailable: ' + FLASHINFER_ERROR}")
    rows = []
    gemm = None
    peers = not args.attnjit_only
    if args.only in (None, "prefill", "prefill_grid", "paged") and not args.rope:
        gemm = gemm_rate()
        print(f"bf16 GEMM (torch.matmul 8192^3): {gemm / 1e12:.0f} TFLOP/s")
    if args.rope:
        for hq, hkv, kvt in ((32, 8, torch.bfloat16), (32, 8, torch.float8_e4m3fn), (32, 4, torch.bfloat16)):
            if args.only in (None, "single"):
                rows.append(bench_single(hq, hkv, 32768, copy, kv_dtype=kvt, peers=peers, pos="ROPE_LLAMA"))
                print(json.dumps(rows[-1]), flush=True)
            if args.only in (None, "batch"):
                for lens in ([4096] * 64, [1024] * 256):
                    rows.append(bench_batch(hq, hkv, lens, copy, kv_dtype=kvt, peers=peers, pos="ROPE_LLAMA"))
                    print(json.dumps(rows[-1]), flush=True)
    elif args.only in (None, "single"):
        for hq, hkv, n in ((32, 8, 4096), (32, 8, 32768), (32, 32, 32768), (64, 8, 32768), (32, 4, 32768)):
            rows.append(bench_single(hq, hkv, n, copy, peers=peers))
            print(json.dumps(rows[-1]), flush=True)
        # fp8 K/V against bf16 at 32k and 128k (issue 6: at least 1.8x faster), in CUDA graphs.
        for n in (32768, 131072):
            for kvt in ((torch.bfloat16, torch.float8_e4m3fn) if n > 32768 else (torch.float8_e4m3fn,)):
                rows.append(bench_single(32, 8, n, copy, kv_dtype=kvt, peers=peers))
                print(json.dumps(rows[-1]), flush=True)
    if args.only in (None, "batch") and args.trtllm_shapes and not args.rope:
        for shape in args.trtllm_shapes.split(","):
            rows.append(bench_speculative(32, 8, shape_lens(shape), copy, q_lens=(1,)))
            print(json.dumps(rows[-1]), flush=True)
    if args.only in (None, "batch") and args.batch_shapes and not args.rope:
        for shape in args.batch_shapes.split(","):
            rows.append(bench_batch(32, 8, shape_lens(shape), copy, peers=peers))
            print(json.dumps(rows[-1]), flush=True)
    elif args.only in (None, "batch") and not args.trtllm_shapes and not args.rope:
        for lens, kvt in (([4096] * 64, torch.bfloat16), ([1024] * 256, torch.bfloat16), ([32768], torch.bfloat16),
                          ([32768] + [512] * 63, torch.bfloat16), ([4096] * 64, torch.float8_e4m3fn)):
            rows.append(bench_batch(32, 8, lens, copy, kv_dtype=kvt, peers=peers))
            print(json.dumps(rows[-1]), flush=True)
        rows.append(bench_batch(32, 32, [4096] * 64, copy, peers=peers))  # MHA
        print(json.dumps(rows[-1]), flush=True)
        rows.append(bench_speculative(32, 8, [4096] * 64, copy))
        print(json.dumps(rows[-1]), flush=True)
    # FlashAttention's grid points (head dim, tokens, causal): single prefill runs one request of n tokens
    # with 2048 / d heads; prefill_grid packs requests of n tokens up to a fixed token count.
    fi_dims = {int(x) for x in args.flashinfer_head_dims.split(",") if x}
    grid = [(d, n, causal) for d in (int(x) for x in args.grid_head_dims.split(","))
            for n in (int(x) for x in args.grid_seqlens.split(",")) for causal in (False, True)]
    if args.only in (None, "prefill") and not args.rope:
        for d, n, causal in grid:
            rows.append(bench_prefill(2048 // d, n, causal, copy, d=d, with_flashinfer=d in fi_dims,
                                      backend=args.attnjit_backend))
            print(json.dumps(rows[-1]), flush=True)
    if args.only in (None, "prefill_grid") and not args.rope:
        for d, n, causal in grid:
            rows.append(bench_prefill_grid(d, n, causal, d in fi_dims))
            print(json.dumps(rows[-1]), flush=True)
    if args.only in (None, "paged") and not args.rope:
        # Append (issue 7's target): 32 requests x 128 new tokens on 8k cached each, 32 / 8 heads, causal.
        rows.append(bench_paged_prefill("append 32 x 128 on 8192", [128] * 32, [8192 + 128] * 32, 32, 8, True, True))
        print(json.dumps(rows[-1]), flush=True)
        # Paged vs ragged on prefill grid points (16 heads, d 128).
        for n, b in ((4096, 4), (1024, 16)):
            for causal in (False, True):
                rows.append(bench_paged_prefill(f"prefill {b} x {n}", [n] * b, [n] * b, 16, 16, causal, True))
                print(json.dumps(rows[-1]), flush=True)
    print()
    for r in rows:
        if r["op"] == "paged_prefill":
            cells = [f"{name}: " + (f"{x['tflops']:.0f}" if "us" in x else x["error"][:60])
                     for name, x in r["results"].items()]
            print(f"paged {r['case']} {'causal' if r['causal'] else 'full':<6} TFLOP/s " + " | ".join(cells))
            continue
        if r["op"] == "batch_prefill":
            cells = [f"{name}: " + (f"{x['tflops']:.0f}" if "us" in x else x["error"][:60])
                     for name, x in r["results"].items()]
            print(f"prefill grid d{r['head_dim']} {r['batch']}x{r['seqlen']} {'causal' if r['causal'] else 'full':<6} "
                  "TFLOP/s " + " | ".join(cells))
            continue
        if r["op"] == "single_prefill":
            cells = [f"{name}: " + (f"{x['tflops']:.0f}" if "us" in x else x["error"][:80])
                     for name, x in r["results"].items()]
            print(f"single prefill d{r['head_dim']} {r['heads']} heads {r['qo_len']}x{r['kv_len']} "
                  f"{'causal' if r['causal'] else 'full':<6} TFLOP/s " + " | ".join(cells))
            continue
        what = (f"single {r['num_qo_heads']}/{r['num_kv_heads']} n={r['kv_len']} {r.get('kv_dtype', 'bfloat16')}"
                if r["op"] == "single_decode"
                else f"batch {r['batch']} {r['num_qo_heads']}/{r['num_kv_heads']} {r.get('kv_dtype', 'bfloat16')}"
                + (" speculative" if r["op"] == "speculative_decode" else ""))
        what += " rope" if r.get("pos_encoding_mode", "NONE") != "NONE" else ""
        cells = []
        for name, x in r["results"].items():
            cells.append(f"{name}: " + (f"{x['us']:.1f} us {x['x_copy']:.2f}x ({x['how']})" if "us" in x
                                        else x["error"][:80]))
        print(f"{what:<44} " + " | ".join(cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_bytes_per_s": copy, "gemm_flops_per_s": gemm, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

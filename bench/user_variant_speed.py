"""Issue 31's speed targets for user variants (score_mod / mask_mod CUDA snippets), one run on one GPU, bf16:

1. twins: each variant as a snippet and as its built-in twin, same problem, timed interleaved. Prefill: one
   request of 16k tokens, 32 / 8 heads, d128, causal (Llama-3-8B's attention): soft cap and ALiBi as score_mod;
   causal and a 1024-token sliding window as mask_mod (the twins: causal=True, window_left; the mask_mods also
   block-sparse where attnjit has it, classified at every call and, with reclassify="on_bind", kept across calls). Batch decode: 64 requests x 4096 keys, paged (16), 32 / 8 heads: soft
   cap and ALiBi as score_mod. Target: snippet time / built-in time <= 1 / 0.95.
2. flex: against FlexAttention (flex_attention under torch.compile, with create_block_mask) at 16k tokens,
   16 heads, d128: document masking over 8 packed documents (causal within each; doc ids in a tensor) and a
   causal 1024-token sliding window (q - kv <= 1024). TFLOP/s count only the allowed (query, key) pairs,
   counted from the mask on the GPU (and checked against the closed form). Contenders: FlexAttention (and its
   first-call compile time: torch._dynamo.reset() and fresh inductor and Triton cache dirs, after the process's
   first torch.compile, which is timed on its own), attnjit's snippet through single prefill without and
   (where attnjit has it) with block sparsity, classified at every call (reclassify="each_run") and kept
   across calls (reclassify="on_bind", as FlexAttention's BlockMask is built once and reused), and attnjit's
   built-in twin (documents as a ragged causal batch; the window as single prefill's window_left). Target:
   attnjit with block sparsity >= 1.2x FlexAttention.
3. cold: cold compile of a snippet variant, decode (ALiBi score_mod) and prefill (document mask_mod; and
   block-sparse where attnjit has it), each in a child process with a fresh, empty ATTNJIT_CACHE_DIR: the
   first call's wall time minus a warm call's; FlexAttention's first-call compile times from part 2 beside
   it. Targets: <= 1.5 s decode, <= 3 s prefill.

Timing as bench/prefill_peers.py does: CUDA graphs of `iters` calls (plain calls where capture fails or, for
on_bind, where a graph would reclassify: the "how" field; plain calls are queued behind a GPU spin so that the
events time the device alone, with the host's time to enqueue a call beside it as host_us), contenders
interleaved rep by rep, medians; every input is larger than the 50 MB L2; the bf16
GEMM rate (torch.matmul 8192^3) before and after. Each part and each row records its error in the JSON and the
run goes on. The JSON is rewritten after every row, so a run cut short keeps what it measured.

  python3 bench/user_variant_speed.py --json out.json [--quick] [--parts twins,flex,cold]
  python3 bench/user_variant_speed.py --dry-run     (the plan and the exact pair counts; no torch, no GPU)
"""
import argparse
import contextlib
import inspect
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

PARTS = ("twins", "flex", "cold")
SNIPPET_SPEED = 0.95  # a snippet runs at >= 0.95x its built-in twin's speed
FLEX_SPEEDUP = 1.2  # attnjit with block sparsity >= 1.2x FlexAttention
COLD_LIMIT_S = {"decode": 1.5, "prefill": 3.0}
AGREE = 2e-2  # relative difference two bf16 outputs of the same attention stay under (else the row says so)

# Llama-3-8B's attention for the twins; FlexAttention's own benchmark shape for part 2.
PREFILL = {"tokens": 16384, "heads": 32, "kv_heads": 8, "head_dim": 128}
DECODE = {"batch": 64, "kv_len": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "page_size": 16}
FLEX = {"tokens": 16384, "heads": 16, "head_dim": 128, "documents": 8, "window": 1024}
SOFT_CAP = 50.0  # Gemma-2's attention soft cap
SOFT_CAP_PARAMS = {"cap": SOFT_CAP, "rcp_cap": 1.0 / SOFT_CAP}
WINDOW = 1024

# The snippets and the params they declare (attnjit.Variant declares them from the values: a float is f32, an
# int i32, a tensor its dtype and rank; the script checks each Variant's declaration against these, and
# bench/test_user_variant_speed.py compiles each one with `attnjit prewarm --variant` on the CPU).
SNIPPETS = {
    # The reciprocal as a param, as the built-in holds it: `s / p.cap` costs a reciprocal on the SFU per score,
    # which ptxas does not hoist (one more SFU op beside tanhf's two and the softmax's exp2).
    "soft_cap": {"score_mod": "return p.cap * tanhf(s * p.rcp_cap);",
                 "params": [{"name": "cap", "type": "f32", "rank": 0}, {"name": "rcp_cap", "type": "f32", "rank": 0}]},
    "alibi": {"score_mod": "return s + p.slope_at(h) * float(kv - (q + p.offset));",
              "params": [{"name": "slope", "type": "f32", "rank": 1}, {"name": "offset", "type": "i32", "rank": 0}]},
    "causal": {"mask_mod": "return kv <= q + p.offset;", "params": [{"name": "offset", "type": "i32", "rank": 0}]},
    "window": {"mask_mod": "int pos = q + p.offset; return kv <= pos && pos - kv <= p.window;",
               "params": [{"name": "offset", "type": "i32", "rank": 0}, {"name": "window", "type": "i32", "rank": 0}]},
    "document": {"mask_mod": "return p.doc_at(q) == p.doc_at(kv) && kv <= q;",
                 "params": [{"name": "doc", "type": "i32", "rank": 1}]},
}


# ------------------------------------------------------------------ exact counts (no torch)
def document_lengths(tokens, documents, seed=0):
    """`documents` lengths summing to `tokens`: cut at documents - 1 distinct random points (fixed seed), so the
    run is the same every time and the documents uneven, as packed training batches are."""
    if not 1 <= documents <= tokens:
        raise ValueError(f"documents={documents}; allowed: 1 to tokens ({tokens})")
    cuts = sorted(random.Random(seed).sample(range(1, tokens), documents - 1))
    bounds = [0] + cuts + [tokens]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def document_ids(torch, lengths):
    """The packed documents' id per token (int32, on the GPU): what the document mask_mod reads as p.doc."""
    return torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32), torch.tensor(lengths)).to("cuda")


def causal_pairs(n):
    """(query, key) pairs with key <= query among n tokens."""
    return n * (n + 1) // 2


def document_pairs(lengths):
    """Pairs of the causal mask within each packed document."""
    return sum(causal_pairs(n) for n in lengths)


def window_pairs(n, window):
    """Pairs with 0 <= query - key <= window among n tokens (window_left=window, causal)."""
    if n <= window + 1:
        return causal_pairs(n)
    return causal_pairs(window + 1) + (n - window - 1) * (window + 1)


def attention_flops(pairs, heads, head_dim):
    """Q K^T and P V over the allowed pairs: 2 x 2 FLOPs per pair, head and dimension."""
    return 4.0 * pairs * heads * head_dim


def twin_verdict(builtin_us, snippet_us):
    """{"time_ratio", "speed", "meets"}: snippet time / built-in time against 1 / SNIPPET_SPEED."""
    ratio = snippet_us / builtin_us
    return {"time_ratio": ratio, "speed": 1.0 / ratio, "meets": ratio <= 1.0 / SNIPPET_SPEED}


def flex_verdict(results, flex="FlexAttention"):
    """name -> FlexAttention's time / that contender's time (> 1: faster than FlexAttention), for every timed
    contender of a part-2 row."""
    base = results.get(flex, {}).get("us")
    if base is None:
        return {}
    return {name: base / r["us"] for name, r in results.items() if name != flex and "us" in r}


# ------------------------------------------------------------------ helpers
def error_text(e):
    """An exception as one short line plus where it was raised (the JSON's "error" fields)."""
    where = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ else []
    at = f" (at {os.path.basename(where[0].filename)}:{where[0].lineno})" if where else ""
    return f"{type(e).__name__}: {e}"[:400] + at


def rel_diff(a, b):
    """Relative Frobenius difference of two outputs (a sanity check that the contenders agree)."""
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def make_variant(attnjit, name, values, **extra):
    """attnjit.Variant of SNIPPETS[name] with `values`, its declaration checked against SNIPPETS (so the CPU
    test compiles exactly what runs here)."""
    spec = SNIPPETS[name]
    v = attnjit.Variant(score_mod=spec.get("score_mod"), mask_mod=spec.get("mask_mod"), params=values, **extra)
    if v.params != spec["params"]:
        raise AssertionError(f"{name}: the values declare {v.params}, the snippet expects {spec['params']}")
    return v


def block_sparse_option(attnjit):
    """(keyword arguments that make a block-sparse Variant, None) or (None, why not: an older library). Issue
    31 item 2: each run classifies the tiles by mask_mod; heads_vary=False promises the mask ignores h (true of
    every mask here), so one classification serves every head."""
    params = inspect.signature(attnjit.Variant).parameters
    if "block_sparse" not in params:
        return None, "no block sparsity: this attnjit's Variant takes no block_sparse (added in f3b1227)"
    return ({"block_sparse": True, **({"heads_vary": False} if "heads_vary" in params else {})}), None


def on_bind_option(attnjit):
    """(keyword arguments that keep a block-sparse Variant's classes across calls, None) or (None, why not: an
    older library). Issue 31 item 2's reuse: reclassify="on_bind" classifies at the first call and after a bind
    only, as FlexAttention reuses the BlockMask create_block_mask built; the timed calls bind nothing."""
    if "reclassify" not in inspect.signature(attnjit.Variant).parameters:
        return None, "no reclassify: this attnjit's Variant classifies at every call (on_bind added in 8ee5c0a)"
    return {"reclassify": "on_bind"}, None


SPARSE = "snippet + block sparsity"  # a twin row's block-sparse contenders: classified at every call
SPARSE_KEPT = "snippet + block sparsity, on_bind"  # and kept across calls


def alibi_slopes(heads):
    """ALiBi's head slopes (the paper's, as attnjit's built-in ALiBi computes them), as python floats."""
    n = 2 ** (heads.bit_length() - 1)
    slopes = [2.0 ** (-8.0 / n * (i + 1)) for i in range(n)]
    return slopes + [2.0 ** (-4.0 / n * (2 * i + 1)) for i in range(heads - n)]


class Run:
    """The run's JSON, rewritten after every row."""

    def __init__(self, path, meta):
        self.path, self.data = path, dict(meta, twins=[], flex=[], cold_compile=[], errors={})

    def add(self, part, row):
        self.data[part].append(row)
        self.save()

    def error(self, part, e):
        self.data["errors"][part] = error_text(e)
        print(f"{part}: FAILED {self.data['errors'][part]}", flush=True)
        self.save()

    def save(self):
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self.data, f, indent=1)


def guarded(run, part, what, fn):
    """fn() -> row, or a row holding the error; added to the run's `part` either way."""
    try:
        row = fn()
    except Exception as e:  # one row's failure must not lose the others
        row = {"what": what, "error": error_text(e)}
        print(f"{what}: FAILED {row['error']}", flush=True)
    run.add(part, row)
    return row


# ------------------------------------------------------------------ part 1: snippet vs built-in twin
# Timed as plain calls: a capturing stream classifies in the graph (so a replay reclassifies) even under
# reclassify="on_bind", whose kept classes only eager calls reuse.
KEPT_NAMES = (SPARSE_KEPT, "attnjit snippet + block sparsity, on_bind")


def timed_results(peers, fns, iters, reps, flops=None, bytes_=None):
    """prefill_peers.time_interleaved over fns (name -> fn()), with TFLOP/s or GB/s where given."""
    res = peers.time_interleaved({n: (lambda i, f=f: f()) for n, f in fns.items()}, 1, iters, reps,
                                 plain=KEPT_NAMES)
    for r in res.values():
        if "us" in r and flops is not None:
            r["tflops"] = flops / (r["us"] * 1e-6) / 1e12
        if "us" in r and bytes_ is not None:
            r["gb_per_s"] = bytes_ / (r["us"] * 1e-6) / 1e9
    return res


def twin_row(torch, peers, what, shape, builtin, snippet, iters, reps, flops=None, bytes_=None, sparse=None,
             kept=None):
    """One twin row: outputs compared once, then the built-in, the snippet and (a mask_mod, where attnjit has
    block sparsity: `sparse`, a callable, or the reason it is absent) the block-sparse snippet, classified at
    every call and (`kept`, likewise) kept across calls (reclassify="on_bind"), timed interleaved."""
    fns = {"built-in": builtin, "snippet": snippet}
    if callable(sparse):
        fns[SPARSE] = sparse
    if callable(kept):
        fns[SPARSE_KEPT] = kept
    reference = builtin()
    diffs = {n: rel_diff(f(), reference) for n, f in fns.items() if n != "built-in"}
    res = timed_results(peers, fns, iters, reps, flops, bytes_)
    row = {"what": what, **shape, "rel_diff": diffs, "agrees": all(d < AGREE for d in diffs.values()),
           "results": res}
    if "us" in res["built-in"] and "us" in res["snippet"]:
        row.update(twin_verdict(res["built-in"]["us"], res["snippet"]["us"]))
    for key, name, given in (("block_sparse", SPARSE, sparse), ("block_sparse_on_bind", SPARSE_KEPT, kept)):
        if isinstance(given, str):
            row[key] = {"skipped": given}
        elif "us" in res["built-in"] and "us" in res.get(name, {}):
            row[key] = twin_verdict(res["built-in"]["us"], res[name]["us"])
    unit = (lambda r: f"{r['tflops']:.0f} TFLOP/s") if flops else (lambda r: f"{r['gb_per_s']:.0f} GB/s")
    cells = [f"{n} {r['us']:.1f} us {unit(r)}" if "us" in r else f"{n} {r['error'][:80]}" for n, r in res.items()]
    print(f"twin {what}: " + " | ".join(cells) + (f" | time ratio {row['time_ratio']:.3f}" if "time_ratio" in row
                                                  else "")
          + (f" | block-sparse {row['block_sparse']['time_ratio']:.3f}" if "time_ratio" in row.get("block_sparse", {})
             else "")
          + (f" | on_bind {row['block_sparse_on_bind']['time_ratio']:.3f}"
             if "time_ratio" in row.get("block_sparse_on_bind", {}) else "") + " | rel diff " + ", ".join(f"{d:.1e}" for d in diffs.values()), flush=True)
    return row


def part_twins_prefill(torch, attnjit, peers, run, quick):
    T, H, HK, D = PREFILL["tokens"], PREFILL["heads"], PREFILL["kv_heads"], PREFILL["head_dim"]
    torch.manual_seed(0)
    q = torch.randn(T, H, D, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(T, HK, D, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(T, HK, D, dtype=torch.bfloat16, device="cuda")
    slopes = torch.tensor(alibi_slopes(H), dtype=torch.float32, device="cuda")
    shape = {"op": "single_prefill", "tokens": T, "heads": H, "kv_heads": HK, "head_dim": D, "dtype": "bfloat16"}
    iters, reps = (2, 5) if quick else (4, 10)
    prefill = attnjit.single_prefill_with_kv_cache
    causal_flops = attention_flops(causal_pairs(T), H, D)
    rows = [("soft cap (score_mod), causal", causal_flops,
             lambda: prefill(q, k, v, causal=True, logits_soft_cap=SOFT_CAP),
             lambda var: (lambda: prefill(q, k, v, causal=True, variant=var)), ("soft_cap", SOFT_CAP_PARAMS)),
            ("causal (mask_mod)", causal_flops, lambda: prefill(q, k, v, causal=True),
             lambda var: (lambda: prefill(q, k, v, variant=var)), ("causal", {"offset": 0}))]
    if not quick:
        rows[1:1] = [("ALiBi (score_mod), causal", causal_flops,
                      lambda: prefill(q, k, v, causal=True, pos_encoding_mode="ALIBI"),
                      lambda var: (lambda: prefill(q, k, v, causal=True, variant=var)),
                      ("alibi", {"slope": slopes, "offset": 0}))]
        rows.append((f"sliding window {WINDOW} (mask_mod)", attention_flops(window_pairs(T, WINDOW), H, D),
                     lambda: prefill(q, k, v, causal=True, window_left=WINDOW),
                     lambda var: (lambda: prefill(q, k, v, variant=var)), ("window", {"offset": 0, "window": WINDOW})))
    sparse_kw, why = block_sparse_option(attnjit)
    kept_kw, why_not_kept = on_bind_option(attnjit)

    def sparse_of(name, values, snippet_of, kept=False):
        """A mask_mod row's block-sparse snippet call (kept: reclassify="on_bind"), or why there is none (a
        score_mod row: None)."""
        if "mask_mod" not in SNIPPETS[name]:
            return None
        if sparse_kw is None:
            return why
        if kept and kept_kw is None:
            return why_not_kept
        return snippet_of(make_variant(attnjit, name, values, **sparse_kw, **(kept_kw if kept else {})))

    for what, flops, builtin, snippet_of, (name, values) in rows:
        guarded(run, "twins", f"prefill {what}",
                lambda: twin_row(torch, peers, f"prefill {what}", dict(shape, snippet=name), builtin,
                                 snippet_of(make_variant(attnjit, name, values)), iters, reps, flops=flops,
                                 sparse=sparse_of(name, values, snippet_of),
                                 kept=sparse_of(name, values, snippet_of, kept=True)))


def part_twins_decode(torch, attnjit, peers, run, quick):
    B, N, H, HK, D, P = (DECODE[x] for x in ("batch", "kv_len", "heads", "kv_heads", "head_dim", "page_size"))
    pages = N // P
    torch.manual_seed(1)
    cache = torch.randn(B * pages, 2, P, HK, D, dtype=torch.bfloat16, device="cuda")
    q = torch.randn(B, H, D, dtype=torch.bfloat16, device="cuda")
    indptr = torch.arange(0, B * pages + 1, pages, dtype=torch.int32)
    indices = torch.randperm(B * pages).to(torch.int32)  # pages scattered in memory
    last = torch.full((B,), P, dtype=torch.int32)
    slopes = torch.tensor(alibi_slopes(H), dtype=torch.float32, device="cuda")
    kv_bytes = 2 * B * N * HK * D * 2
    iters, reps = (10, 8) if quick else (20, 15)
    plan_args = (indptr, indices, last, H, HK, D, P)

    def wrapper(tc, **kw):
        w = attnjit.BatchDecodeWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"),
                                                       "NHD", use_tensor_cores=tc)
        w.plan(*plan_args, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16, **kw)
        out = torch.empty_like(q)
        return lambda: w.run(q, cache, out=out)

    # The decode query is q = 0 of its request at position kv_len - 1.
    cases = [("soft cap (score_mod)", {"logits_soft_cap": SOFT_CAP}, ("soft_cap", SOFT_CAP_PARAMS)),
             ("ALiBi (score_mod)", {"pos_encoding_mode": "ALIBI"}, ("alibi", {"slope": slopes, "offset": N - 1}))]
    for tc in ((False,) if quick else (False, True)):
        for what, builtin_kw, (name, values) in cases:
            label = f"batch decode {what}{' tensor cores' if tc else ''}"
            shape = {"op": "batch_decode", "batch": B, "kv_len": N, "heads": H, "kv_heads": HK, "head_dim": D,
                     "page_size": P, "use_tensor_cores": tc, "kv_bytes": kv_bytes, "snippet": name}
            guarded(run, "twins", label,
                    lambda: twin_row(torch, peers, label, shape, wrapper(tc, **builtin_kw),
                                     wrapper(tc, variant=make_variant(attnjit, name, values)), iters, reps,
                                     bytes_=kv_bytes))


# ------------------------------------------------------------------ part 2: against FlexAttention
def count_pairs(torch, mask_mod, n, rows=1024):
    """Allowed (query, key) pairs of a FlexAttention mask_mod over n x n, evaluated on the GPU in row blocks."""
    kv = torch.arange(n, device="cuda")[None, :]
    zero = torch.zeros((), dtype=torch.int64, device="cuda")
    total = 0
    for r in range(0, n, rows):
        qi = torch.arange(r, min(n, r + rows), device="cuda")[:, None]
        total += int(mask_mod(zero, zero, qi, kv).sum())
    return total


@contextlib.contextmanager
def fresh_compile_state(torch, scratch):
    """torch.compile as in a fresh process: torch._dynamo.reset(), a new empty inductor cache dir with
    inductor's in-memory caches cleared, and a new Triton cache dir (restored after)."""
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

    os.makedirs(scratch)
    old_triton = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "triton")
    try:
        with temporary_cache_dir(os.path.join(scratch, "inductor")):
            torch._dynamo.reset()
            yield
    finally:
        if old_triton is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = old_triton


def inductor_first_use(torch, scratch):
    """Seconds of the process's first torch.compile (a one-line pointwise function, fresh state): imports,
    the compile worker pool, Triton's first use. Paid once per process before any FlexAttention compile; the
    FlexAttention compile times are measured after it, so they hold what each mask adds."""
    with fresh_compile_state(torch, scratch):
        x = torch.randn(1 << 20, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.compile(lambda t: torch.sin(t) * 2.0 + 1.0)(x)
        torch.cuda.synchronize()
        return time.perf_counter() - t0


def fresh_flex_compile(torch, flex_attention, qf, kf, vf, block_mask, scratch):
    """(compiled flex, {"first_call_s", "warm_call_s", "compile_s"}): torch.compile(flex_attention) in fresh
    compile state, its first call's wall time minus a warm call's (median of 3)."""
    with fresh_compile_state(torch, scratch):
        flex = torch.compile(flex_attention)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        flex(qf, kf, vf, block_mask=block_mask)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        warm = []
        for _ in range(3):
            t0 = time.perf_counter()
            flex(qf, kf, vf, block_mask=block_mask)
            torch.cuda.synchronize()
            warm.append(time.perf_counter() - t0)
    w = statistics.median(warm)
    return flex, {"first_call_s": first, "warm_call_s": w, "compile_s": first - w}


def flex_row(torch, attnjit, peers, what, mask_mod, pairs_closed, builtin, snippet, iters, reps, scratch):
    """One mask at FLEX's shape: FlexAttention (compile time, then speed), attnjit's snippet (single prefill,
    without and with block sparsity) and its built-in twin (`builtin`: (name, indptr, plan keywords), the
    ragged wrapper over indptr, or single prefill where indptr is None), outputs compared with FlexAttention's;
    snippet(extra) makes the Variant with extra keywords."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    T, H, D = FLEX["tokens"], FLEX["heads"], FLEX["head_dim"]
    pairs = count_pairs(torch, mask_mod, T)
    if pairs != pairs_closed:
        raise AssertionError(f"{what}: the mask allows {pairs} pairs, the closed form says {pairs_closed}")
    flops = attention_flops(pairs, H, D)
    torch.manual_seed(2)
    q = torch.randn(T, H, D, dtype=torch.bfloat16, device="cuda")  # attnjit's NHD
    k, v = torch.randn_like(q), torch.randn_like(q)
    qf, kf, vf = (x.transpose(0, 1).contiguous().unsqueeze(0) for x in (q, k, v))  # FlexAttention's [1, H, T, D]
    res = {}
    row = {"what": what, "tokens": T, "heads": H, "head_dim": D, "dtype": "bfloat16", "pairs": pairs,
           "density": pairs / (T * T), "flops": flops, "results": res}

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    block_mask = create_block_mask(mask_mod, None, None, T, T, device="cuda")
    torch.cuda.synchronize()
    mask_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    block_mask = create_block_mask(mask_mod, None, None, T, T, device="cuda")
    torch.cuda.synchronize()
    row["flex_block_mask"] = {"first_call_s": mask_first, "warm_call_s": time.perf_counter() - t0,
                              "sparsity_percent": float(block_mask.sparsity())}
    fns, outs = {}, {}
    try:
        flex, compile_times = fresh_flex_compile(torch, flex_attention, qf, kf, vf, block_mask, scratch)
        fns["FlexAttention"] = lambda: flex(qf, kf, vf, block_mask=block_mask)
        outs["FlexAttention"] = flex(qf, kf, vf, block_mask=block_mask)[0].transpose(0, 1)
        row["flex_compile"] = compile_times
    except Exception as e:
        res["FlexAttention"] = {"error": error_text(e)}

    def contender(name, make_call):
        """make_call() -> the timed call; its output kept for the comparison with FlexAttention's."""
        try:
            call = make_call()
            outs[name] = call().clone()
            fns[name] = call
        except Exception as e:
            res[name] = {"error": error_text(e)}

    def ragged_call(indptr, **plan_kw):
        w = attnjit.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"),
                                                         "NHD")
        w.plan(indptr, indptr, H, H, D, q_data_type=torch.bfloat16, **plan_kw)
        out = torch.empty_like(q)
        return lambda: w.run(q, k, v, out=out)

    # The snippets through single prefill (one request: the mask reads the packed doc ids as FlexAttention does).
    prefill = attnjit.single_prefill_with_kv_cache

    def snippet_call(extra):
        var = snippet(extra)
        return lambda: prefill(q, k, v, variant=var)

    def builtin_call():
        if indptr is None:
            return lambda: prefill(q, k, v, **builtin_kw)
        return ragged_call(indptr, **builtin_kw)

    contender("attnjit snippet, no block sparsity", lambda: snippet_call(None))
    sparse_kw, why = block_sparse_option(attnjit)
    kept_kw, why_not_kept = on_bind_option(attnjit)
    if sparse_kw is None:
        res["attnjit snippet + block sparsity"] = {"skipped": why}
        res["attnjit snippet + block sparsity, on_bind"] = {"skipped": why}
    else:
        contender("attnjit snippet + block sparsity", lambda: snippet_call(sparse_kw))
        if kept_kw is None:
            res["attnjit snippet + block sparsity, on_bind"] = {"skipped": why_not_kept}
        else:
            contender("attnjit snippet + block sparsity, on_bind", lambda: snippet_call({**sparse_kw, **kept_kw}))
    builtin_name, indptr, builtin_kw = builtin
    contender(f"attnjit built-in ({builtin_name})", builtin_call)
    if "FlexAttention" in outs:
        row["rel_diff_vs_flex"] = {n: rel_diff(o, outs["FlexAttention"]) for n, o in outs.items()
                                   if n != "FlexAttention"}
        row["agrees"] = all(d < AGREE for d in row["rel_diff_vs_flex"].values())
    res.update(timed_results(peers, fns, iters, reps, flops=flops))
    order = ["FlexAttention", "attnjit snippet, no block sparsity", "attnjit snippet + block sparsity",
             "attnjit snippet + block sparsity, on_bind"]
    res = row["results"] = {n: res[n] for n in sorted(res, key=lambda n: order.index(n) if n in order else 4)}
    row["speed_vs_flex"] = flex_verdict(res)
    sparse = row["speed_vs_flex"].get("attnjit snippet + block sparsity")
    row["meets"] = None if sparse is None else sparse >= FLEX_SPEEDUP
    kept = row["speed_vs_flex"].get("attnjit snippet + block sparsity, on_bind")
    row["meets_on_bind"] = None if kept is None else kept >= FLEX_SPEEDUP
    cells = [f"{n} {r['tflops']:.0f} TFLOP/s" if "us" in r else f"{n} {(r.get('error') or r['skipped'])[:70]}"
             for n, r in res.items()]
    comp = row.get("flex_compile", {}).get("compile_s")
    print(f"flex {what}: " + " | ".join(cells) + (f" | Flex compile {comp:.1f} s" if comp is not None else ""),
          flush=True)
    return row


def part_flex(torch, attnjit, peers, run, quick, scratch):
    T, W = FLEX["tokens"], FLEX["window"]
    iters, reps = (2, 5) if quick else (4, 10)
    lengths = document_lengths(T, FLEX["documents"])
    doc = document_ids(torch, lengths)
    doc_indptr = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)

    def document_mask(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)

    def window_mask(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= W)

    try:
        run.data["inductor_first_use_s"] = inductor_first_use(torch, os.path.join(scratch, "inductor_first_use"))
        print(f"torch.compile's first use in this process: {run.data['inductor_first_use_s']:.1f} s", flush=True)
    except Exception as e:
        run.data["inductor_first_use_s"] = {"error": error_text(e)}
    what = f"document mask, {len(lengths)} packed documents"
    row = guarded(run, "flex", what, lambda: flex_row(
        torch, attnjit, peers, what, document_mask, document_pairs(lengths),
        ("ragged causal batch", doc_indptr, {"causal": True}),
        lambda extra: make_variant(attnjit, "document", {"doc": doc}, **(extra or {})), iters, reps,
        os.path.join(scratch, "flex_document")))
    row["document_lengths"] = lengths
    run.save()
    torch.cuda.empty_cache()  # the row's inputs, outputs and graphs are gone with its frame
    what = f"sliding window {W}, causal"
    guarded(run, "flex", what, lambda: flex_row(
        torch, attnjit, peers, what, window_mask, window_pairs(T, W),
        ("window_left", None, {"causal": True, "window_left": W}),
        lambda extra: make_variant(attnjit, "window", {"offset": 0, "window": W}, **(extra or {})), iters, reps,
        os.path.join(scratch, "flex_window")))


# ------------------------------------------------------------------ part 3: cold compile
def cold_child(which):
    """In a fresh process with an empty ATTNJIT_CACHE_DIR (the parent's): one snippet problem's first call
    (compiles every kernel it needs) and warm calls; prints one line 'COLD <json>'."""
    import torch

    import attnjit
    from attnjit import _runtime

    torch.manual_seed(3)
    H, HK, D = PREFILL["heads"], PREFILL["kv_heads"], PREFILL["head_dim"]
    if which == "decode":
        n = DECODE["kv_len"]
        q = torch.randn(H, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(n, HK, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn_like(k)
        slopes = torch.tensor(alibi_slopes(H), dtype=torch.float32, device="cuda")
        variant = make_variant(attnjit, "alibi", {"slope": slopes, "offset": n - 1})
        call = lambda: attnjit.single_decode_with_kv_cache(q, k, v, variant=variant)  # noqa: E731
        problem = {"op": "single_decode", "snippet": "alibi", "kv_len": n}
    else:
        n = 4096
        lengths = document_lengths(n, 4)
        doc = document_ids(torch, lengths)
        q = torch.randn(n, H, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(n, HK, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn_like(k)
        extra = {}
        if which == "prefill_block_sparse":
            extra, why = block_sparse_option(attnjit)
            if extra is None:
                print("COLD " + json.dumps({"which": which, "skipped": why}), flush=True)
                return 0
        variant = make_variant(attnjit, "document", {"doc": doc}, **extra)
        call = lambda: attnjit.single_prefill_with_kv_cache(q, k, v, variant=variant)  # noqa: E731
        problem = {"op": "single_prefill", "snippet": "document", "tokens": n, "block_sparse": bool(extra)}
    _runtime.handle()  # the runtime (and its cache folder) exists before the clock starts
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    call()
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    warm = []
    for _ in range(5):
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        warm.append(time.perf_counter() - t0)
    cache = os.environ.get("ATTNJIT_CACHE_DIR", "")
    cubins = sum(f.endswith(".cubin") for _, _, files in os.walk(cache) for f in files) if cache else None
    w = statistics.median(warm)
    print("COLD " + json.dumps({"which": which, **problem, "heads": H, "kv_heads": HK, "head_dim": D,
                                "first_call_s": first, "warm_call_s": w, "compile_s": first - w,
                                "kernels_compiled": cubins}), flush=True)
    return 0


def part_cold(run, scratch, timeout, quick):
    flex = {r["what"]: r["flex_compile"]["compile_s"] for r in run.data["flex"] if "flex_compile" in r}
    for which in ("decode", "prefill") + (() if quick else ("prefill_block_sparse",)):
        limit = COLD_LIMIT_S["decode" if which == "decode" else "prefill"]

        def one():
            cache = tempfile.mkdtemp(prefix=f"attnjit-cold-{which}-", dir=scratch)
            events = os.path.join(cache, "events.jsonl")  # the library's compile events: NVRTC's own seconds
            env = dict(os.environ, ATTNJIT_CACHE_DIR=cache, ATTNJIT_TELEMETRY=events)
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--cold-child", which], env=env,
                               capture_output=True, text=True, timeout=timeout)
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("COLD ")]
            if r.returncode != 0 or not lines:
                tail = " | ".join((r.stderr or r.stdout).strip().splitlines()[-3:])[-400:]
                raise RuntimeError(f"cold child {which}: exit {r.returncode}: {tail}")
            row = json.loads(lines[-1][5:])
            row.update({"what": f"cold compile {which}", "child_wall_s": time.perf_counter() - t0,
                        "limit_s": limit, "flex_compile_s": flex,
                        "flex_torch_compile_first_use_s": run.data.get("inductor_first_use_s")})
            compiles = []
            if os.path.exists(events):
                with open(events) as f:
                    compiles = [e for e in map(json.loads, f) if e.get("event") == "compile"]
            row["nvrtc"] = [{"spec": e["spec"], "seconds": e["seconds"]} for e in compiles]
            if "compile_s" in row:
                # A first call that compiled nothing, or took less than NVRTC did, did not measure a cold compile.
                nvrtc_s = sum(e["seconds"] for e in compiles)
                if not compiles or row["compile_s"] < nvrtc_s:
                    raise RuntimeError(f"cold child {which}: first call minus warm {row['compile_s']:.3f} s against "
                                       f"NVRTC {nvrtc_s:.3f} s over {len(compiles)} compiles: not a cold compile")
                row["meets"] = row["compile_s"] <= limit
                print(f"cold {which}: {row['compile_s']:.2f} s (first call {row['first_call_s']:.2f} s, warm "
                      f"{row['warm_call_s'] * 1e3:.2f} ms, {row['kernels_compiled']} kernels); FlexAttention: "
                      + ", ".join(f"{k} {s:.1f} s" for k, s in flex.items()), flush=True)
            else:
                print(f"cold {which}: {row.get('skipped')}", flush=True)
            return row

        guarded(run, "cold_compile", f"cold compile {which}", one)


# ------------------------------------------------------------------ driver
def dry_run(args):
    T, W = FLEX["tokens"], FLEX["window"]
    lengths = document_lengths(T, FLEX["documents"])
    print(f"parts: {', '.join(args.parts)}{' (quick)' if args.quick else ''}")
    print(f"twins: prefill {PREFILL} causal; batch decode {DECODE}; soft cap {SOFT_CAP}, window {WINDOW}")
    print(f"  causal pairs {causal_pairs(PREFILL['tokens'])}, window pairs {window_pairs(PREFILL['tokens'], WINDOW)}")
    print(f"flex: {FLEX}")
    for what, pairs in ((f"documents {lengths}", document_pairs(lengths)), (f"window {W}", window_pairs(T, W))):
        flops = attention_flops(pairs, FLEX["heads"], FLEX["head_dim"])
        print(f"  {what}: {pairs} pairs ({pairs / T / T:.4f} of {T}^2), {flops / 1e9:.1f} GFLOP")
    print(f"cold: decode (alibi) <= {COLD_LIMIT_S['decode']} s, prefill (document) <= {COLD_LIMIT_S['prefill']} s")
    for name, spec in SNIPPETS.items():
        body = spec.get("score_mod") or spec.get("mask_mod")
        print(f"  snippet {name} ({'score_mod' if 'score_mod' in spec else 'mask_mod'}): {body}")
    return 0


def parse_parts(text):
    parts = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        raise ValueError(f"--parts={text}; allowed: a comma-separated subset of {','.join(PARTS)}")
    return parts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the run (versions, GEMM rate, every row) here")
    ap.add_argument("--quick", action="store_true",
                    help="fewer rows and repetitions (prefill soft cap and causal, decode without tensor cores; "
                         "both FlexAttention masks; decode and prefill cold compiles, not the block-sparse one)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"which parts, of {','.join(PARTS)} (default: all)")
    ap.add_argument("--cold-timeout", type=int, default=180, help="seconds per cold-compile child process")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the pair counts (no torch) and exit")
    ap.add_argument("--cold-child", choices=["decode", "prefill", "prefill_block_sparse"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cold_child:
        return cold_child(args.cold_child)
    try:
        args.parts = parse_parts(args.parts)
    except ValueError as e:
        ap.error(str(e))
    if args.cold_timeout < 1:
        ap.error(f"--cold-timeout={args.cold_timeout}; allowed: at least 1")
    if args.dry_run:
        return dry_run(args)

    started = time.perf_counter()  # the whole run, imports included (--quick is meant to take under 2 minutes)
    sys.path.insert(0, HERE)
    import torch

    import attnjit
    import prefill_peers as peers  # graphs, interleaved medians, the GEMM rate (imports FlashInfer if present)

    flashinfer, fi_error = peers.import_flashinfer()
    try:
        import triton
        triton_version = triton.__version__
    except Exception as e:
        triton_version = error_text(e)
    meta = {"command": " ".join([os.path.basename(sys.executable)] + sys.argv), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "triton": triton_version,
            "flashinfer": flashinfer.__version__ if flashinfer else fi_error, "attnjit": attnjit.version(),
            "quick": args.quick, "parts": args.parts,
            "targets": {"snippet_time_ratio_max": 1.0 / SNIPPET_SPEED, "flex_speedup_min": FLEX_SPEEDUP,
                        "cold_compile_s_max": COLD_LIMIT_S}}
    print(f"device: {meta['device']}  torch {meta['torch']}  triton {triton_version}  flashinfer: "
          f"{meta['flashinfer']}  attnjit {meta['attnjit']}", flush=True)
    run = Run(args.json, meta)
    gemm_runs = [peers.gemm_tflops()]
    run.data.update(gemm_tflops=gemm_runs[0], gemm_tflops_runs=gemm_runs)
    print(f"bf16 GEMM (torch.matmul 8192^3): {gemm_runs[0]:.1f} TFLOP/s", flush=True)
    run.save()
    with tempfile.TemporaryDirectory(prefix="user-variant-speed-") as scratch:
        if "twins" in args.parts:
            for part in (part_twins_prefill, part_twins_decode):
                try:
                    part(torch, attnjit, peers, run, args.quick)
                except Exception as e:
                    run.error(part.__name__, e)
                torch.cuda.empty_cache()
        if "flex" in args.parts:
            try:
                part_flex(torch, attnjit, peers, run, args.quick, scratch)
            except Exception as e:
                run.error("flex", e)
        torch.cuda.empty_cache()
        if "cold" in args.parts:
            try:
                part_cold(run, scratch, args.cold_timeout, args.quick)
            except Exception as e:
                run.error("cold_compile", e)
    gemm_runs.append(peers.gemm_tflops())
    run.data.update(gemm_tflops=max(gemm_runs), gemm_tflops_runs=gemm_runs, wall_s=time.perf_counter() - started)
    run.save()
    print(f"bf16 GEMM after: {gemm_runs[-1]:.1f} TFLOP/s; the run took {run.data['wall_s']:.0f} s\n")
    print(summary(run.data))
    return 0


def summary(data):
    """The run's verdicts as text (also usable on a saved JSON)."""
    lines = [f"{data.get('device')}: GEMM {data.get('gemm_tflops', 0):.0f} TFLOP/s"]
    disagree = lambda r: "" if r.get("agrees", True) else "; OUTPUTS DISAGREE"  # noqa: E731
    verdict = lambda r: f"time ratio {r['time_ratio']:.3f} ({'meets' if r['meets'] else 'MISSES'} <= " \
        f"{1 / SNIPPET_SPEED:.3f})"  # noqa: E731
    for r in data.get("twins", []):
        text = verdict(r) if "time_ratio" in r else r.get("error", "not timed")[:100]
        sparse = r.get("block_sparse")
        if sparse:
            text += "; block-sparse " + (verdict(sparse) if "time_ratio" in sparse else sparse["skipped"][:60])
        kept = r.get("block_sparse_on_bind")
        if kept:
            text += "; on_bind " + (verdict(kept) if "time_ratio" in kept else kept["skipped"][:60])
        lines.append(f"  twin  {r['what']:<44} {text}{disagree(r)}")
    for r in data.get("flex", []):
        speeds = ", ".join(f"{n} {x:.2f}x" for n, x in r.get("speed_vs_flex", {}).items()) or r.get("error", "")[:100]
        comp = r.get("flex_compile", {}).get("compile_s")
        target = {True: "meets", False: "MISSES", None: "not measured"}[r.get("meets")]
        kept = {True: "meets", False: "MISSES", None: "not measured"}[r.get("meets_on_bind")]
        lines.append(f"  flex  {r['what']:<40} vs FlexAttention: {speeds}"
                     + (f"; Flex compile {comp:.1f} s" if comp is not None else "")
                     + f"; block sparsity >= {FLEX_SPEEDUP}x: {target}"
                     + (f" (on_bind: {kept})" if "meets_on_bind" in r else "") + disagree(r))
    for r in data.get("cold_compile", []):
        text = (f"{r['compile_s']:.2f} s ({'meets' if r['meets'] else 'MISSES'} <= {r['limit_s']} s)"
                if "compile_s" in r else (r.get("skipped") or r.get("error", ""))[:100])
        lines.append(f"  cold  {r['what']:<40} {text}")
    for part, e in data.get("errors", {}).items():
        lines.append(f"  {part} FAILED: {e}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

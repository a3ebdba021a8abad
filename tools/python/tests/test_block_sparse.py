"""Block sparsity of a user mask_mod (issue 31 item 2): attnjit.Variant(..., block_sparse=True, heads_vary=...,
reclassify=...), on single prefill and on the batch prefill wrappers.

The checks without a GPU run anywhere: the keyword arguments and their refusals. The GPU tests (torch + CUDA)
run the masks of issue 31 through single prefill on fa2 and fa3 (fa3 where the device is sm_90) with and without
block sparsity, at lengths that are no multiple of any tile and GQA groups of 3 and 4, each against a float64
reference and against the same variant without block sparsity (the same kernels but for the tiles skipped: equal
up to float reassociation); a rebind that changes the classes between two runs of one cached plan; and a
CUDA graph that replays the classification; reclassify="on_bind": a second run with the same values repeats the
first bit for bit even after the doc ids were rewritten in place, a bind is seen, and a graph captured under
on_bind replays its own classification. The ragged and paged batch wrappers: per-request document masks (b the
request) at ragged lengths with a request of one token, GQA group 3, page size 16 with partial last pages,
against float64 and the dense variant; on_bind there (a bind and a new plan() classify again); the refusals
(CUDA-graph mode). The classes themselves are checked against a CPU evaluation in the
Catch2 GPU test tests/block_sparse/gpu_test.cpp.
"""

import pytest

import attnjit
from attnjit import AttnjitError, Status

DOCUMENTS = "return p.doc_at(q) == p.doc_at(kv) && kv <= q;"


def test_keywords_are_checked_without_a_gpu():
    v = attnjit.Variant(mask_mod="return kv <= q + p.shift;", params={"shift": 3}, block_sparse=True)
    assert v.block_sparse and v.heads_vary
    assert "block_sparse=True" in repr(v)
    shared = attnjit.Variant(mask_mod="return kv <= q;", block_sparse=True, heads_vary=False)
    assert not shared.heads_vary
    with pytest.raises(AttnjitError) as e:
        attnjit.Variant(score_mod="return s;", block_sparse=True)
    assert e.value.status == Status.INVALID_ARGUMENT and "needs a mask_mod" in str(e.value)
    with pytest.raises(AttnjitError) as e:
        attnjit.Variant(mask_mod="return true;", heads_vary=False)
    assert e.value.status == Status.INVALID_ARGUMENT and "heads_vary=false" in str(e.value)
    with pytest.raises(AttnjitError) as e:
        attnjit.Variant(mask_mod="return true;", block_sparse=1)
    assert e.value.status == Status.INVALID_ARGUMENT and "block_sparse=1" in str(e.value)


def test_reclassify_is_checked_without_a_gpu():
    assert attnjit.Variant(mask_mod="return kv <= q;", block_sparse=True).reclassify == "each_run"
    kept = attnjit.Variant(mask_mod="return kv <= q;", block_sparse=True, reclassify="on_bind")
    assert kept.reclassify == "on_bind" and "reclassify='on_bind'" in repr(kept)
    for bad in ("sometimes", None, 1, "ON_BIND"):
        with pytest.raises(AttnjitError) as e:
            attnjit.Variant(mask_mod="return kv <= q;", block_sparse=True, reclassify=bad)
        assert e.value.status == Status.INVALID_ARGUMENT
        assert f"reclassify={bad!r} is not allowed" in str(e.value) and "'on_bind'" in str(e.value)
    with pytest.raises(AttnjitError) as e:  # the library's check: nothing to keep without block sparsity
        attnjit.Variant(mask_mod="return kv <= q;", reclassify="on_bind")
    assert e.value.status == Status.INVALID_ARGUMENT and "reclassify='on_bind'" in str(e.value)
    with pytest.raises(TypeError):  # keyword-only
        attnjit.Variant(None, "return kv <= q;", None, True, True, "on_bind")


try:
    import torch
except ImportError:  # the GPU tests below skip; the checks above run
    torch = None
else:
    import masked_reference
    from masked_reference import rel
gpu = pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs torch and a CUDA device")
# By dtype name, so that this module imports without torch.
TOLERANCE = {"float16": 3e-3, "bfloat16": 1.5e-2}  # relative Frobenius error against float64
SAME = {"float16": 1e-3, "bfloat16": 8e-3}  # block-sparse against dense: reassociation only


def backends():
    if torch is None or not torch.cuda.is_available():
        return ["fa2"]
    return ["fa2", "fa3", "fa3_ws"] if torch.cuda.get_device_capability() == (9, 0) else ["fa2"]


def on_each_backend(test):
    """A GPU test (gpu) run once per backend of this device (backends())."""
    return gpu(pytest.mark.parametrize("backend", backends())(test))


def reference(q, k, v, visible):
    """o [T, H, D], lse [T, H] (base 2) in float64; visible(h, i, j) -> bool, broadcastable."""
    return masked_reference.reference(q, k, v, visible=visible)


def qkv(qo, kv, heads, kv_heads, d=128, dtype="float16", seed=0):
    torch.manual_seed(seed)
    dtype = getattr(torch, dtype)
    q = torch.randn(qo, heads, d, dtype=dtype, device="cuda")
    k = torch.randn(kv, kv_heads, d, dtype=dtype, device="cuda")
    v = torch.randn(kv, kv_heads, d, dtype=dtype, device="cuda")
    return q, k, v


def run_both(q, k, v, backend, mask_mod, params, heads_vary=True):
    """(o, lse) of the block-sparse variant and of the same mask without block sparsity."""
    sparse = attnjit.Variant(mask_mod=mask_mod, params=params, block_sparse=True, heads_vary=heads_vary)
    dense = attnjit.Variant(mask_mod=mask_mod, params=params)
    got = attnjit.single_prefill_with_kv_cache_return_lse(q, k, v, backend=backend, variant=sparse)
    twin = attnjit.single_prefill_with_kv_cache_return_lse(q, k, v, backend=backend, variant=dense)
    return got, twin


def check(got, twin, ref, dtype):
    (o, lse), (o_dense, lse_dense), (o_ref, lse_ref) = got, twin, ref
    assert rel(o, o_ref) < TOLERANCE[dtype]
    assert rel(o, o_dense) < SAME[dtype]
    seen = torch.isfinite(lse_ref)
    assert torch.equal(torch.isfinite(lse), seen.to(lse.device))  # rows without a key: lse -inf, as dense
    assert torch.equal(torch.isfinite(lse_dense), seen.to(lse.device))
    assert (lse[seen] - lse_ref[seen]).abs().max().item() < 2e-2
    unseen = ~seen.to(o.device)
    if unseen.any():
        assert o[unseen].abs().max().item() == 0.0


@on_each_backend
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("heads_vary", [True, False])
def test_document_masking_over_packed_sequences(backend, dtype, heads_vary):
    lengths = [100, 37, 263, 1, 99, 555]
    n = sum(lengths)
    doc = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32), torch.tensor(lengths)).to("cuda")
    q, k, v = qkv(n, n, heads=12, kv_heads=4, dtype=dtype, seed=1)  # group 3
    got, twin = run_both(q, k, v, backend, DOCUMENTS, {"doc": doc}, heads_vary)
    d64 = doc.long()
    check(got, twin, reference(q, k, v, lambda h, i, j: (d64[i] == d64[j]) & (j <= i)), dtype)


WINDOW_WITH_SINKS = "const int pos = q + p.offset; return kv <= pos && (kv < p.sinks || pos - kv <= p.window);"


@on_each_backend
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sliding_window_with_sink_tokens(backend, dtype):
    qo, kv, window, sinks = 701, 1999, 127, 4
    q, k, v = qkv(qo, kv, heads=16, kv_heads=4, dtype=dtype, seed=2)  # group 4
    params = {"offset": kv - qo, "window": window, "sinks": sinks}
    got, twin = run_both(q, k, v, backend, WINDOW_WITH_SINKS, params)

    def visible(h, i, j):
        pos = i + (kv - qo)
        return (j <= pos) & ((j < sinks) | (pos - j <= window))

    check(got, twin, reference(q, k, v, visible), dtype)


@on_each_backend
def test_prefix_lm_and_causal_as_mask_mod(backend):
    dtype = "bfloat16"
    n, prefix = 1333, 190
    q, k, v = qkv(n, n, heads=8, kv_heads=2, dtype=dtype, seed=3)
    got, twin = run_both(q, k, v, backend, "return kv < p.prefix || kv <= q;", {"prefix": prefix})
    check(got, twin, reference(q, k, v, lambda h, i, j: (j < prefix) | (j <= i)), dtype)
    got, twin = run_both(q, k, v, backend, "return kv <= q;", {}, heads_vary=False)
    check(got, twin, reference(q, k, v, lambda h, i, j: j <= i), dtype)
    builtin = attnjit.single_prefill_with_kv_cache(q, k, v, backend=backend, causal=True)
    assert rel(got[0], builtin) < SAME[dtype]


@on_each_backend
def test_a_mask_that_reads_the_head_and_rows_without_keys(backend):
    # Odd heads see only the first half of the keys, even heads the second: per-head classes; queries
    # past p.stop see nothing (o = 0, lse = -inf).
    dtype = "float16"
    qo, kv = 517, 777
    q, k, v = qkv(qo, kv, heads=12, kv_heads=3, dtype=dtype, seed=4)
    mask = "return q < p.stop && ((h & 1) ? kv < p.half : kv >= p.half);"
    params = {"stop": 450, "half": kv // 2}
    got, twin = run_both(q, k, v, backend, mask, params)
    ref = reference(q, k, v, lambda h, i, j: (i < 450) & torch.where(h % 2 == 1, j < kv // 2, j >= kv // 2))
    check(got, twin, ref, dtype)


@on_each_backend
def test_a_rebind_changes_the_classes_of_the_next_run(backend):
    dtype = "float16"
    n = 900
    q, k, v = qkv(n, n, heads=8, kv_heads=2, dtype=dtype, seed=5)
    one_doc = torch.zeros(n, dtype=torch.int32, device="cuda")
    many = torch.repeat_interleave(torch.arange(9, dtype=torch.int32), torch.full((9,), 100)).to("cuda")
    variant = attnjit.Variant(mask_mod=DOCUMENTS, params={"doc": one_doc}, block_sparse=True)
    first = attnjit.single_prefill_with_kv_cache(q, k, v, backend=backend, variant=variant)
    ref1, _ = reference(q, k, v, lambda h, i, j: j <= i)
    assert rel(first, ref1) < TOLERANCE[dtype]
    variant.bind(doc=many)  # most tiles become empty
    second = attnjit.single_prefill_with_kv_cache(q, k, v, backend=backend, variant=variant)
    m64 = many.long()
    ref2, _ = reference(q, k, v, lambda h, i, j: (m64[i] == m64[j]) & (j <= i))
    assert rel(second, ref2) < TOLERANCE[dtype]
    # A tensor rewritten in place: the next run classifies it again.
    many.copy_(one_doc)
    third = attnjit.single_prefill_with_kv_cache(q, k, v, backend=backend, variant=variant)
    assert rel(third, ref1) < TOLERANCE[dtype]


@gpu
@pytest.mark.parametrize("reclassify", ["each_run", "on_bind"])
def test_a_captured_graph_replays_the_classification(reclassify):
    # on_bind too: a capturing stream classifies into the workspace, inside the graph.
    dtype = "float16"
    n = 640
    q, k, v = qkv(n, n, heads=8, kv_heads=2, dtype=dtype, seed=6)
    doc = torch.zeros(n, dtype=torch.int32, device="cuda")
    variant = attnjit.Variant(mask_mod=DOCUMENTS, params={"doc": doc}, block_sparse=True, reclassify=reclassify)
    attnjit.single_prefill_with_kv_cache(q, k, v, variant=variant)  # plan, compile (and keep classes) outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = attnjit.single_prefill_with_kv_cache(q, k, v, variant=variant)
    doc.copy_(torch.arange(n, dtype=torch.int32, device="cuda") // 100)  # in place: the replay classifies it
    graph.replay()
    torch.cuda.synchronize()
    d64 = doc.long()
    ref, _ = reference(q, k, v, lambda h, i, j: (d64[i] == d64[j]) & (j <= i))
    assert rel(out, ref) < TOLERANCE[dtype]


# Keeps every pair while the doc ids are all one document (every tile full: the prefill never evaluates it).
SAME_DOCUMENT = "return p.doc_at(q) == p.doc_at(kv);"


@on_each_backend
def test_on_bind_keeps_the_classes_until_a_bind(backend):
    dtype = "float16"
    qo, kv = 397, 1031  # no multiple of a tile; group 3
    q, k, v = qkv(qo, kv, heads=12, kv_heads=4, dtype=dtype, seed=8)
    doc = torch.zeros(kv, dtype=torch.int32, device="cuda")
    docs = torch.tensor([0] * 150 + [1] * 250 + [2] + [3] * (kv - 401), dtype=torch.int32, device="cuda")
    kept = attnjit.Variant(mask_mod=SAME_DOCUMENT, params={"doc": doc}, block_sparse=True, heads_vary=False,
                           reclassify="on_bind")
    run = lambda variant: attnjit.single_prefill_with_kv_cache(q, k, v, backend=backend, variant=variant)  # noqa: E731
    first = run(kept)
    ref_one, _ = reference(q, k, v, lambda h, i, j: torch.ones_like(i == j))
    assert rel(first, ref_one) < TOLERANCE[dtype]
    again = run(kept)
    assert torch.equal(again, first)

    doc.copy_(docs)  # in place, no bind: on_bind does not see it (documented), each_run does
    stale = run(kept)
    assert torch.equal(stale, first)  # the kept classes: all full, so mask_mod is never evaluated
    d64 = docs.long()
    ref_docs, _ = reference(q, k, v, lambda h, i, j: d64[i] == d64[j])
    assert rel(ref_docs, ref_one) > 0.1  # the two masks are told apart
    each = attnjit.Variant(mask_mod=SAME_DOCUMENT, params={"doc": doc}, block_sparse=True, heads_vary=False)
    assert rel(run(each), ref_docs) < TOLERANCE[dtype]

    kept.bind(doc=doc)  # the same tensor bound anew: classified again at the next run
    rebound = run(kept)
    assert rel(rebound, ref_docs) < TOLERANCE[dtype]

    # A new tensor through bind, on another stream (its own copy of the classes).
    other = torch.arange(kv, dtype=torch.int32, device="cuda") // 300
    kept.bind(doc=other)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = run(kept)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    o64 = other.long()
    ref_other, _ = reference(q, k, v, lambda h, i, j: o64[i] == o64[j])
    assert rel(out, ref_other) < TOLERANCE[dtype]


# The batch wrappers: a doc id per (request, position) in a [batch, longest] tensor, causal at the request's end
# (its queries are the last qo_len of its kv_len positions); b is the request.
BATCH_DOCUMENTS = ("const int pos = q + p.offset_at(b); "
                   "return kv <= pos && p.doc_at(b, kv) == p.doc_at(b, pos);")


def batch_inputs(qo_lens, kv_lens, heads, kv_heads, d=128, dtype="float16", seed=0):
    """q [sum qo], per-request K/V [kv, Hk, d], doc ids [batch, max kv] (uneven documents), offsets [batch]."""
    torch.manual_seed(seed)
    dt = getattr(torch, dtype)
    q = torch.randn(sum(qo_lens), heads, d, dtype=dt, device="cuda")
    ks = [torch.randn(n, kv_heads, d, dtype=dt, device="cuda") for n in kv_lens]
    vs = [torch.randn(n, kv_heads, d, dtype=dt, device="cuda") for n in kv_lens]
    longest = max(kv_lens)
    doc = (torch.arange(longest, device="cuda")[None, :] // torch.tensor([53, 1, 97, 200, 31][:len(kv_lens)],
                                                                         device="cuda")[:, None]).to(torch.int32)
    offset = torch.tensor([kv - qo for qo, kv in zip(qo_lens, kv_lens)], dtype=torch.int32, device="cuda")
    return q, ks, vs, doc.contiguous(), offset


def batch_reference(q, ks, vs, qo_lens, doc, offset, causal=True):
    outs, at = [], 0
    for b, (qo, k, v) in enumerate(zip(qo_lens, ks, vs)):
        d64, off = doc[b].long(), int(offset[b])
        o, _ = reference(q[at:at + qo], k, v,
                         lambda h, i, j: ((j <= i + off) | (not causal)) & (d64[j] == d64[i + off]))
        outs.append(o)
        at += qo
    return torch.cat(outs)


QO_LENS, KV_LENS = [100, 1, 263, 37], [150, 1, 263, 300]  # no multiple of a tile; a request of one token


def indptr(lengths):
    return torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)


@on_each_backend
@pytest.mark.parametrize("heads_vary", [True, False])
def test_ragged_wrapper_block_sparse_documents(backend, heads_vary):
    dtype = "float16"
    q, ks, vs, doc, offset = batch_inputs(QO_LENS, KV_LENS, heads=12, kv_heads=4, seed=20)  # group 3
    params = {"doc": doc, "offset": offset}
    k, v = torch.cat(ks), torch.cat(vs)
    outs = {}
    for sparse in (True, False):
        variant = attnjit.Variant(mask_mod=BATCH_DOCUMENTS, params=params, block_sparse=sparse,
                                  heads_vary=heads_vary or not sparse)
        w = attnjit.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"),
                                                         backend=backend)
        w.plan(indptr(QO_LENS), indptr(KV_LENS), 12, 4, 128, q_data_type=torch.float16, variant=variant)
        outs[sparse] = w.run(q, k, v)
    ref = batch_reference(q, ks, vs, QO_LENS, doc, offset)
    assert rel(outs[True], ref) < TOLERANCE[dtype]
    assert rel(outs[True], outs[False]) < SAME[dtype]


@on_each_backend
def test_paged_wrapper_block_sparse_documents_with_a_partial_last_page(backend):
    dtype, page = "float16", 16
    q, ks, vs, doc, offset = batch_inputs(QO_LENS, KV_LENS, heads=12, kv_heads=4, seed=21)
    pages = [(n + page - 1) // page for n in KV_LENS]
    kv_indptr = indptr(pages)
    total = int(kv_indptr[-1])
    indices = torch.randperm(total, dtype=torch.int32)
    last = torch.tensor([(n - 1) % page + 1 for n in KV_LENS], dtype=torch.int32)
    cache = torch.zeros(total, 2, page, 4, 128, dtype=torch.float16, device="cuda")
    for b, n in enumerate(KV_LENS):
        ids = indices[int(kv_indptr[b]):int(kv_indptr[b + 1])].long().cuda()
        padded = lambda x: torch.cat([x, x.new_zeros(pages[b] * page - n, 4, 128)])  # noqa: E731
        cache[ids, 0] = padded(ks[b]).reshape(pages[b], page, 4, 128)
        cache[ids, 1] = padded(vs[b]).reshape(pages[b], page, 4, 128)
    variant = attnjit.Variant(mask_mod=BATCH_DOCUMENTS, params={"doc": doc, "offset": offset}, block_sparse=True,
                              heads_vary=False)
    w = attnjit.BatchPrefillWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"),
                                                    backend=backend)
    w.plan(indptr(QO_LENS), kv_indptr.cuda(), indices.cuda(), last.cuda(), 12, 4, 128, page,
           q_data_type=torch.float16, variant=variant)
    out = w.run(q, cache)
    assert rel(out, batch_reference(q, ks, vs, QO_LENS, doc, offset)) < TOLERANCE[dtype]


@on_each_backend
def test_ragged_wrapper_on_bind_keeps_the_classes_until_a_bind_or_a_plan(backend):
    # Without causality: one document keeps every pair, so every tile is full and the prefill never evaluates
    # the mask; a run on kept classes then repeats the first output bit for bit whatever the doc ids became.
    dtype = "float16"
    q, ks, vs, doc, offset = batch_inputs(QO_LENS, KV_LENS, heads=12, kv_heads=4, seed=22)
    k, v = torch.cat(ks), torch.cat(vs)
    one = torch.zeros_like(doc)
    ids = one.clone()
    variant = attnjit.Variant(mask_mod="return p.doc_at(b, kv) == p.doc_at(b, q + p.offset_at(b));",
                              params={"doc": ids, "offset": offset}, block_sparse=True, heads_vary=False,
                              reclassify="on_bind")
    w = attnjit.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"),
                                                     backend=backend)
    plan = lambda: w.plan(indptr(QO_LENS), indptr(KV_LENS), 12, 4, 128, q_data_type=torch.float16,  # noqa: E731
                          variant=variant)
    plan()
    first = w.run(q, k, v).clone()
    assert rel(first, batch_reference(q, ks, vs, QO_LENS, one, offset, causal=False)) < TOLERANCE[dtype]
    docs_ref = batch_reference(q, ks, vs, QO_LENS, doc, offset, causal=False)
    assert rel(docs_ref, first) > 0.1  # the two masks are told apart
    ids.copy_(doc)  # in place, no bind: not seen under on_bind
    assert torch.equal(w.run(q, k, v), first)
    variant.bind(doc=ids)  # the same tensor bound anew: seen at the next run
    assert rel(w.run(q, k, v), docs_ref) < TOLERANCE[dtype]
    ids.copy_(one)  # in place again; a new plan classifies again
    plan()
    assert rel(w.run(q, k, v), first) < SAME[dtype]


@gpu
def test_batch_wrappers_refuse_block_sparsity_in_cuda_graph_mode():
    variant = attnjit.Variant(mask_mod="return kv <= q;", block_sparse=True)
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    bufs = [torch.empty(3, dtype=torch.int32, device="cuda") for _ in range(2)]  # max batch 2
    w = attnjit.BatchPrefillWithRaggedKVCacheWrapper(ws, use_cuda_graph=True, qo_indptr_buf=bufs[0],
                                                     kv_indptr_buf=bufs[1])
    with pytest.raises(AttnjitError) as e:
        w.plan(indptr([3, 4]), indptr([3, 4]), 4, 4, 128, variant=variant)
    assert e.value.status == Status.UNSUPPORTED and "use_cuda_graph=true" in str(e.value)


@gpu
def test_operators_without_a_block_mask_refuse_it():
    q, k, v = qkv(64, 64, heads=4, kv_heads=4, seed=7)
    variant = attnjit.Variant(mask_mod="return kv <= q;", block_sparse=True)
    with pytest.raises(AttnjitError) as e:
        attnjit.single_decode_with_kv_cache(q[0], k, v, variant=variant)
    assert e.value.status == Status.UNSUPPORTED and "block_sparse" in str(e.value)

"""Device tables checked without a sync (attnjit.h: attnjit_plan_check / attnjit_runtime_check): a bad page
id in TensorRT-LLM's block tables, or one a caller wrote into a CUDA-graph wrapper's fixed indices buffer,
reads nothing outside the cache, leaves the other requests' output right, and is raised as INVALID_ARGUMENT
naming the array, the index and the value by the next call (or check_tables / wrapper.check()); the call
after that is clean. The argument checks run without torch; the rest needs a CUDA device.
"""

import math

import pytest

import attnjit
from attnjit import AttnjitError, Status


def test_check_tables_names_a_negative_device():
    with pytest.raises(AttnjitError) as caught:
        attnjit.check_tables(-1)
    assert caught.value.status == Status.INVALID_ARGUMENT and "device=-1 is not allowed" in caught.value.message


def _torch():
    torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")
    return torch


def _raises_invalid(call, *fragments):
    with pytest.raises(AttnjitError) as caught:
        call()
    assert caught.value.status == Status.INVALID_ARGUMENT, caught.value.message
    for f in fragments:
        assert f in caught.value.message, caught.value.message


def test_trtllm_block_table_past_the_cache_is_named_by_the_next_call():
    torch = _torch()
    from paged_batch import PagedBatch, check, make_q, reference, workspace

    dtype, lens, hkv, d = torch.bfloat16, [300, 77, 1000, 5], 2, 128
    batch = PagedBatch(lens, 16, hkv, d, dtype, "HND", seed=71)
    q = make_q(len(lens), 4 * hkv, d, dtype, seed=72)
    scale = 1 / math.sqrt(d)
    o_ref, _ = reference(q, batch, scale)
    pages = batch.kv.shape[0]
    bad = batch.block_tables.clone()
    bad[2, 7] = pages + 1234

    def call(tables):
        return attnjit.trtllm_batch_decode_with_kv_cache(q, batch.kv, workspace(), tables, batch.seq_lens, max(lens),
                                                         bmm1_scale=scale, kv_layout="HND")

    o = call(bad)  # returns: the kernel read a page of the cache instead
    torch.cuda.synchronize()
    good = [0, 1, 3]
    check(o[good], None, o_ref[good], None, dtype)
    _raises_invalid(lambda: call(batch.block_tables), f"block_tables[2][7]={pages + 1234} is not allowed",
                    f"the cache has {pages} pages")
    o = call(batch.block_tables)  # clean
    torch.cuda.synchronize()
    check(o, None, o_ref, None, dtype)
    attnjit.check_tables(q.device)
    # check_tables waits for the device and raises what the call before met.
    call(bad)
    _raises_invalid(lambda: attnjit.check_tables(q.device), "block_tables[2][7]=")
    attnjit.check_tables()


def test_wrapper_indices_overwritten_before_a_graph_replay_are_named_by_check():
    torch = _torch()
    from paged_batch import PagedBatch, check, graph_wrapper, make_q, reference

    dtype, layout, ps, hkv, d = torch.float16, "NHD", 16, 2, 128
    lens = [300, 77, 1000, 5]
    w, bufs = graph_wrapper(layout, len(lens))
    batch = PagedBatch(lens, ps, hkv, d, dtype, layout, seed=73)
    q = make_q(len(lens), 4 * hkv, d, dtype, seed=74)
    w.plan(batch.indptr, batch.indices, batch.last_page_len, 4 * hkv, hkv, d, ps, q_data_type=dtype)
    out = torch.empty_like(q)
    w.run(q, batch.kv, out=out)  # warm up outside capture (kernels load)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        w.run(q, batch.kv, out=out)
    o_ref, _ = reference(q, batch)
    pages = batch.kv.shape[0]
    entry = int(batch.indptr[2]) + 3
    bufs[1][entry] = pages + 50  # the caller overwrites the fixed buffer, then replays
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    good = [0, 1, 3]
    check(out[good], None, o_ref[good], None, dtype)
    _raises_invalid(w.check, f"indices[{entry}]={pages + 50} is not allowed", f"the cache has {pages} pages")
    w.check()  # reported once
    # The next plan() restores the fixed buffer; the replay after it is right and clean.
    w.plan(batch.indptr, batch.indices, batch.last_page_len, 4 * hkv, hkv, d, ps, q_data_type=dtype)
    graph.replay()
    torch.cuda.synchronize()
    check(out, None, o_ref, None, dtype)
    w.check()


def test_ragged_prefill_indptr_overwritten_before_a_graph_replay_is_named_by_the_next_run():
    """The ragged wrapper in CUDA-graph mode reads qo_indptr and kv_indptr from the caller's buffers: an entry
    past q's or k's rows voids its request (no rows: untouched; no keys: zeros), the others stay right, and the
    next run() names the entry, its value and the rows allowed."""
    torch = _torch()
    from dense_reference import attention

    dtype, hq, hk, d = torch.bfloat16, 8, 2, 128
    qo_lens, kv_lens = [17, 1, 64, 5], [300, 77, 1000, 5]
    qo = torch.tensor([0] + qo_lens, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    kv = torch.tensor([0] + kv_lens, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    rows, keys = int(qo[-1]) + 3, int(kv[-1])  # q has 3 rows past the plan's: they count as q's rows
    gen = torch.Generator(device="cuda").manual_seed(81)
    q = torch.randn(rows, hq, d, dtype=dtype, device="cuda", generator=gen)
    k = torch.randn(keys, hk, d, dtype=dtype, device="cuda", generator=gen)
    v = torch.randn(keys, hk, d, dtype=dtype, device="cuda", generator=gen)
    qo_buf = torch.empty(5, dtype=torch.int32, device="cuda")
    kv_buf = torch.empty(5, dtype=torch.int32, device="cuda")
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    w = attnjit.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", use_cuda_graph=True, qo_indptr_buf=qo_buf,
                                                     kv_indptr_buf=kv_buf)
    w.plan(qo, kv, hq, hk, d, causal=True, q_data_type=dtype)
    out = torch.empty_like(q)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        w.run(q, k, v, out=out)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        w.run(q, k, v, out=out)

    def replay():
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()

    def request_ok(b):
        s, e, ks, ke = int(qo[b]), int(qo[b + 1]), int(kv[b]), int(kv[b + 1])
        o_ref, _ = attention(q[s:e], k[ks:ke], v[ks:ke], causal=True)
        err = (out[s:e].double() - o_ref).norm() / o_ref.norm()
        return float(err) <= 1e-2

    for buf, value, what in ((qo_buf, rows + 50, f"qo_indptr[4]={rows + 50} is not allowed: allowed {int(qo[3])} "
                                                 f"to {rows}"),
                             (kv_buf, keys + 100, f"kv_indptr[4]={keys + 100} is not allowed: allowed {int(kv[3])} "
                                                  f"to {keys} (kv_indptr must not decrease, and k has {keys} rows)")):
        buf[4] = value  # the caller overwrites the fixed buffer, then replays
        replay()
        assert all(request_ok(b) for b in range(3))
        last = out[int(qo[3]):int(qo[4])]
        assert torch.isnan(last).all() if buf is qo_buf else (last == 0).all()
        assert torch.isnan(out[int(qo[4]):]).all()  # the spare rows
        _raises_invalid(lambda: w.run(q, k, v, out=out), what)
        buf[4] = int(qo[4] if buf is qo_buf else kv[4])
        replay()
        assert all(request_ok(b) for b in range(4))
        w.check()

"""A torch CUDA graph that captured a wrapper's run() is replayed after the
wrapper is gone (the pattern that faulted on the H100: the lambda holding the
wrapper went out of scope, then graph.replay()). The library's plan memory
and table-check record are held by the graph; the replay must not fault and
must give the captured run's output, equal to a float64 reference.

Skips without torch and a CUDA device.
"""

import gc
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402

DEVICE = "cuda:0"
HQ, HK, D = 8, 2, 128


def reference(q, k, v, qo_indptr, kv_indptr):
    """Causal attention per request in float64 (the query's last row sees every key)."""
    out = []
    g = HQ // HK
    for b in range(len(qo_indptr) - 1):
        qb = q[qo_indptr[b]:qo_indptr[b + 1]].double()
        kb = k[kv_indptr[b]:kv_indptr[b + 1]].double().repeat_interleave(g, 1)
        vb = v[kv_indptr[b]:kv_indptr[b + 1]].double().repeat_interleave(g, 1)
        qo, kv = qb.shape[0], kb.shape[0]
        s = torch.einsum("qhd,khd->hqk", qb, kb) / math.sqrt(D)
        pos = torch.arange(qo, device=q.device)[:, None] + (kv - qo)
        s = s.masked_fill(~(torch.arange(kv, device=q.device)[None, :] <= pos)[None], float("-inf"))
        out.append(torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vb))
    return torch.cat(out)


def test_replay_after_the_ragged_wrapper_is_collected():
    torch.manual_seed(7)
    qo_indptr, kv_indptr = [0, 3, 4, 11, 48], [0, 3001, 3334, 6233, 6300]
    q = torch.randn(qo_indptr[-1], HQ, D, dtype=torch.float16, device=DEVICE)
    k = torch.randn(kv_indptr[-1], HK, D, dtype=torch.float16, device=DEVICE)
    v = torch.randn(kv_indptr[-1], HK, D, dtype=torch.float16, device=DEVICE)
    workspace = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device=DEVICE)
    out = torch.empty_like(q)

    def make_run():
        w = attnjit.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD")
        w.plan(torch.tensor(qo_indptr, dtype=torch.int32, device=DEVICE),
               torch.tensor(kv_indptr, dtype=torch.int32, device=DEVICE), HQ, HK, D, causal=True,
               q_data_type=torch.float16)
        return lambda: w.run(q, k, v, out=out)

    run = make_run()
    run()  # outside capture: the kernels load
    torch.cuda.synchronize()
    direct = out.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    del run  # the last reference to the wrapper
    gc.collect()
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()  # an illegal address would raise here
    assert torch.equal(out, direct)
    torch.testing.assert_close(out.double(), reference(q, k, v, qo_indptr, kv_indptr), atol=2e-3, rtol=2e-3)
    del graph
    gc.collect()


def test_replay_after_the_decode_wrapper_is_collected():
    torch.manual_seed(8)
    page_size, lens = 16, [2001, 17, 4500, 1]
    pages = [(n + page_size - 1) // page_size for n in lens]
    indptr = [0]
    for p in pages:
        indptr.append(indptr[-1] + p)
    last = [n - (n - 1) // page_size * page_size for n in lens]
    kv = torch.randn(indptr[-1], 2, page_size, HK, D, dtype=torch.float16, device=DEVICE)
    q = torch.randn(len(lens), HQ, D, dtype=torch.float16, device=DEVICE)
    workspace = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device=DEVICE)
    out = torch.empty_like(q)

    def make_run():
        w = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
        w.plan(torch.tensor(indptr, dtype=torch.int32, device=DEVICE),
               torch.arange(indptr[-1], dtype=torch.int32, device=DEVICE),
               torch.tensor(last, dtype=torch.int32, device=DEVICE), HQ, HK, D, page_size,
               q_data_type=torch.float16)
        return lambda: w.run(q, kv, out=out)

    run = make_run()
    run()
    torch.cuda.synchronize()
    direct = out.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    del run
    gc.collect()
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, direct)
    # Request b's keys: its pages in order, the last one cut at last[b].
    k_rows = kv[:, 0].reshape(-1, HK, D)
    v_rows = kv[:, 1].reshape(-1, HK, D)
    rows = torch.cat([torch.arange(indptr[b] * page_size, indptr[b] * page_size + lens[b]) for b in range(len(lens))])
    kv_indptr = [0]
    for n in lens:
        kv_indptr.append(kv_indptr[-1] + n)
    want = reference(q, k_rows[rows.to(DEVICE)], v_rows[rows.to(DEVICE)], list(range(len(lens) + 1)), kv_indptr)
    torch.testing.assert_close(out.double(), want, atol=2e-3, rtol=2e-3)

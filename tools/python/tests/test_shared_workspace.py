"""Several wrappers on one float workspace, as vLLM and SGLang build them: FlashInfer's float_workspace_buffer
is scratch that every wrapper shares, while each keeps its plan in memory of its own. A decode, a paged
prefill, a ragged prefill and a two-level cascade wrapper share one buffer, are all planned, then run in
another order and again in a third: each output matches a float64 reference and repeats bit for bit. Then a
CUDA graph holding a decode and a paged prefill run (fixed buffers) is captured once and replayed after new
plans, with an eager ragged wrapper planned and run on the same workspace between replays.

Odd sizes: GQA group 3, KV lengths off page boundaries, a request of length 1. Skips without torch or a CUDA
device.
"""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402

from dense_reference import attention  # noqa: E402
from paged_batch import check, make_q  # noqa: E402
from paged_pool import DEVICE, PagePool, Requests, indptr  # noqa: E402

HQ, HK, D, PS = 6, 2, 128, 16  # GQA group 3
DTYPE = torch.float16


def _decode_ref(q, requests):
    refs = [attention(q[r:r + 1], *requests.dense(r)) for r in range(len(requests.kv_lens))]
    return torch.cat([o for o, _ in refs]), torch.cat([lse for _, lse in refs])


def _prefill_ref(q, qo_lens, dense, causal=True):
    outs, lses, row = [], [], 0
    for r, n in enumerate(qo_lens):
        o, lse = attention(q[row:row + n], *dense(r), causal=causal)
        outs.append(o)
        lses.append(lse)
        row += n
    return torch.cat(outs), torch.cat(lses)


class Scene:
    """The four wrappers' inputs and references over one page pool."""

    def __init__(self, seed):
        self.pool = PagePool(200, PS, HK, D, DTYPE, seed)
        self.decode = Requests(self.pool, [1, 33, 300])
        self.q_decode = make_q(3, HQ, D, DTYPE, seed=seed + 1)
        self.prefill = Requests(self.pool, [17, 1, 250])
        self.qo_prefill = [5, 1, 40]
        self.q_prefill = make_q(sum(self.qo_prefill), HQ, D, DTYPE, seed=seed + 2)
        self.qo_ragged, self.kv_ragged = [7, 1, 64], [7, 20, 100]
        self.q_ragged = make_q(sum(self.qo_ragged), HQ, D, DTYPE, seed=seed + 3)
        g = torch.Generator(device=DEVICE).manual_seed(seed + 4)
        self.k_ragged = torch.randn(sum(self.kv_ragged), HK, D, generator=g, device=DEVICE).to(DTYPE)
        self.v_ragged = torch.randn(sum(self.kv_ragged), HK, D, generator=g, device=DEVICE).to(DTYPE)
        # Cascade: a 40-token prefix shared by every request, then each request's own pages (causal).
        self.shared = Requests(self.pool, [40])
        self.unique = Requests(self.pool, [9, 3, 70])
        self.qo_cascade = [9, 1, 30]
        self.q_cascade = make_q(sum(self.qo_cascade), HQ, D, DTYPE, seed=seed + 5)

    def ragged_dense(self, r):
        start = sum(self.kv_ragged[:r])
        return (self.k_ragged[start:start + self.kv_ragged[r]], self.v_ragged[start:start + self.kv_ragged[r]])

    def cascade_dense(self, r):
        k_shared, v_shared = self.shared.dense(0)
        k, v = self.unique.dense(r)
        return torch.cat([k_shared, k]), torch.cat([v_shared, v])

    def plan_decode(self, wrapper):
        wrapper.plan(*self.decode.table(), HQ, HK, D, PS, q_data_type=DTYPE)

    def plan_paged(self, wrapper):
        wrapper.plan(indptr(self.qo_prefill), *self.prefill.table(), HQ, HK, D, PS, causal=True, q_data_type=DTYPE)

    def plan_ragged(self, wrapper):
        wrapper.plan(indptr(self.qo_ragged), indptr(self.kv_ragged), HQ, HK, D, causal=True, q_data_type=DTYPE)

    def plan_cascade(self, wrapper):
        total = sum(self.qo_cascade)
        shared_indptr, shared_indices, shared_last = self.shared.table()
        wrapper.plan([torch.tensor([0, total], dtype=torch.int32), indptr(self.qo_cascade)],
                     [shared_indptr, self.unique.indptr], [shared_indices, self.unique.indices],
                     [shared_last, self.unique.last_page_len], HQ, HK, D, PS, causal=True, q_data_type=DTYPE)

    def references(self):
        return {"decode": _decode_ref(self.q_decode, self.decode),
                "paged": _prefill_ref(self.q_prefill, self.qo_prefill, self.prefill.dense),
                "ragged": _prefill_ref(self.q_ragged, self.qo_ragged, self.ragged_dense),
                "cascade": _prefill_ref(self.q_cascade, self.qo_cascade, self.cascade_dense)}


def _run(name, wrappers, scene):
    if name == "decode":
        return wrappers[name].run(scene.q_decode, scene.pool.kv, return_lse=True)
    if name == "paged":
        return wrappers[name].run(scene.q_prefill, scene.pool.kv, return_lse=True)
    if name == "ragged":
        return wrappers[name].run(scene.q_ragged, scene.k_ragged, scene.v_ragged, return_lse=True)
    return wrappers[name].run(scene.q_cascade, scene.pool.kv), None


def test_wrappers_planned_together_then_run_in_other_orders():
    ws = torch.empty(128 << 20, dtype=torch.uint8, device=DEVICE)
    wrappers = {"decode": attnjit.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD"),
                "paged": attnjit.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD"),
                "ragged": attnjit.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD"),
                "cascade": attnjit.MultiLevelCascadeAttentionWrapper(2, ws, "NHD")}
    scene = Scene(seed=11)
    for name in ("decode", "paged", "ragged", "cascade"):  # every plan before any run
        getattr(scene, f"plan_{name}")(wrappers[name])
    refs = scene.references()
    first = {}
    for name in ("cascade", "ragged", "paged", "decode"):
        o, lse = _run(name, wrappers, scene)
        o_ref, lse_ref = refs[name]
        check(o, lse, o_ref, None if lse is None else lse_ref, DTYPE)
        first[name] = (o.clone(), None if lse is None else lse.clone())
    for name in ("paged", "decode", "cascade", "ragged"):
        o, lse = _run(name, wrappers, scene)
        torch.cuda.synchronize()
        assert torch.equal(o, first[name][0]), f"{name}: another run order changed o"
        if lse is not None:
            assert torch.equal(lse, first[name][1]), f"{name}: another run order changed lse"


def test_graph_of_shared_workspace_wrappers_replays_after_new_plans():
    ws = torch.empty(128 << 20, dtype=torch.uint8, device=DEVICE)
    batch, max_pages, max_rows = 3, 120, 64
    decode_buffers = dict(paged_kv_indptr_buffer=torch.zeros(batch + 1, dtype=torch.int32, device=DEVICE),
                          paged_kv_indices_buffer=torch.zeros(max_pages, dtype=torch.int32, device=DEVICE),
                          paged_kv_last_page_len_buffer=torch.zeros(batch, dtype=torch.int32, device=DEVICE))
    prefill_buffers = dict(qo_indptr_buf=torch.zeros(batch + 1, dtype=torch.int32, device=DEVICE),
                           paged_kv_indptr_buf=torch.zeros(batch + 1, dtype=torch.int32, device=DEVICE),
                           paged_kv_indices_buf=torch.zeros(max_pages, dtype=torch.int32, device=DEVICE),
                           paged_kv_last_page_len_buf=torch.zeros(batch, dtype=torch.int32, device=DEVICE))
    decode = attnjit.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_cuda_graph=True, **decode_buffers)
    paged = attnjit.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", use_cuda_graph=True, **prefill_buffers)
    ragged = attnjit.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")
    pool = PagePool(400, PS, HK, D, DTYPE, seed=5)
    q_decode = make_q(batch, HQ, D, DTYPE, seed=6)
    q_prefill = make_q(max_rows, HQ, D, DTYPE, seed=7)
    steps = [([1, 40, 250], [3, 1, 60], [5, 17, 200]), ([300, 2, 17], [1, 20, 40], [33, 29, 120]),
             ([16, 129, 1], [16, 16, 32], [16, 50, 64])]

    def plan(step):
        decode_lens, qo_lens, kv_lens = steps[step]
        pool.free = list(range(pool.kv.shape[0]))[::-1]  # each step reuses the pool's pages in another order
        decode_requests, prefill_requests = Requests(pool, decode_lens), Requests(pool, kv_lens)
        decode.plan(*decode_requests.table(), HQ, HK, D, PS, q_data_type=DTYPE)
        paged.plan(indptr(qo_lens), *prefill_requests.table(), HQ, HK, D, PS, causal=True, q_data_type=DTYPE)
        return decode_requests, prefill_requests, qo_lens

    decode_requests, prefill_requests, qo_lens = plan(0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture: the kernels load
        decode.run(q_decode, pool.kv)
        paged.run(q_prefill, pool.kv)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o_decode, lse_decode = decode.run(q_decode, pool.kv, return_lse=True)
        o_prefill = paged.run(q_prefill, pool.kv)
    for step in range(len(steps)):
        if step:
            decode_requests, prefill_requests, qo_lens = plan(step)
        # An eager wrapper planned and run on the same workspace between the plans and the replay.
        ragged_qo, ragged_kv = [4, 1], [30, 9]
        q_ragged = make_q(5, HQ, D, DTYPE, seed=20 + step)
        k_ragged = make_q(39, HK, D, DTYPE, seed=30 + step)
        ragged.plan(indptr(ragged_qo), indptr(ragged_kv), HQ, HK, D, causal=True, q_data_type=DTYPE)
        o_ragged = ragged.run(q_ragged, k_ragged, k_ragged)
        graph.replay()
        o_ref, lse_ref = _decode_ref(q_decode, decode_requests)
        check(o_decode, lse_decode, o_ref, lse_ref, DTYPE)
        rows = sum(qo_lens)
        o_ref, _ = _prefill_ref(q_prefill[:rows], qo_lens, prefill_requests.dense)
        check(o_prefill[:rows], None, o_ref, None, DTYPE)
        ragged_ref = _prefill_ref(q_ragged, ragged_qo,
                                  lambda r: (k_ragged[sum(ragged_kv[:r]):sum(ragged_kv[:r + 1])],) * 2)
        check(o_ragged, None, ragged_ref[0], None, DTYPE)

"""workspace_size() of the batch decode and paged prefill wrappers, as FlashInfer 0.7.2's: (float, int) bytes that
a plan() with the same arguments needs. Used as FlashInfer documents it (reset_workspace_buffer with buffers of
exactly those sizes, then plan()), the plan succeeds and its output matches a float64 reference and, bit for bit,
a wrapper with room to spare; one byte less of either buffer is refused naming it; the int figure is what
attnjit_plan_int_workspace_bytes reports after the plan. A query between plan() and run() changes nothing, nor
does one before a plan(). Arguments attnjit cannot honour are UNSUPPORTED, as in plan().

Odd sizes: GQA group 3, KV lengths off page boundaries, page size 1, a request of length 1. Skips without torch
or a CUDA device.
"""

import ctypes

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit._library import lib  # noqa: E402

from dense_reference import attention  # noqa: E402
from paged_batch import check, make_q  # noqa: E402
from paged_pool import DEVICE, PagePool, Requests, indptr  # noqa: E402

HQ, HK, D = 6, 2, 128
DTYPE = torch.float16


def _bytes(n):
    return torch.empty(n, dtype=torch.uint8, device=DEVICE)


def _planned_bytes(wrapper):
    """(attnjit_plan_workspace_bytes, attnjit_plan_int_workspace_bytes) of the wrapper's plan."""
    float_bytes, int_bytes = ctypes.c_size_t(), ctypes.c_size_t()
    assert lib().attnjit_plan_workspace_bytes(wrapper._plan.handle, ctypes.byref(float_bytes)) == 0
    assert lib().attnjit_plan_int_workspace_bytes(wrapper._plan.handle, ctypes.byref(int_bytes)) == 0
    return float_bytes.value, int_bytes.value


def _too_small(plan, name):
    with pytest.raises(attnjit.AttnjitError) as info:
        plan()
    assert info.value.status == attnjit.Status.WORKSPACE_TOO_SMALL
    assert name in info.value.message


class Decode:
    make = staticmethod(lambda ws: attnjit.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD"))

    def __init__(self, pool, lens, seed):
        self.requests = Requests(pool, lens)
        self.page_size = pool.page_size
        self.q = make_q(len(lens), HQ, D, DTYPE, seed=seed)
        self.pool = pool

    def args(self):
        return (*self.requests.table(), HQ, HK, D, self.page_size)

    def plan(self, w):
        w.plan(*self.args(), q_data_type=DTYPE)

    def size(self, w, **extra):
        return w.workspace_size(*self.args(), q_data_type=DTYPE, **extra)

    def run(self, w):
        return w.run(self.q, self.pool.kv, return_lse=True)

    def reference(self):
        refs = [attention(self.q[r:r + 1], *self.requests.dense(r)) for r in range(len(self.requests.kv_lens))]
        return torch.cat([o for o, _ in refs]), torch.cat([lse for _, lse in refs])


class PagedPrefill(Decode):
    make = staticmethod(lambda ws: attnjit.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD"))

    def __init__(self, pool, lens, seed, qo_lens):
        super().__init__(pool, lens, seed)
        self.qo_lens = qo_lens
        self.q = make_q(sum(qo_lens), HQ, D, DTYPE, seed=seed)

    def args(self):
        return (indptr(self.qo_lens), *self.requests.table(), HQ, HK, D, self.page_size)

    def plan(self, w):
        w.plan(*self.args(), causal=True, q_data_type=DTYPE)

    def size(self, w, **extra):
        return w.workspace_size(*self.args(), causal=True, q_data_type=DTYPE, **extra)

    def reference(self):
        outs, lses, row = [], [], 0
        for r, n in enumerate(self.qo_lens):
            o, lse = attention(self.q[row:row + n], *self.requests.dense(r), causal=True)
            outs.append(o)
            lses.append(lse)
            row += n
        return torch.cat(outs), torch.cat(lses)


def _cases(page_size, seed):
    lens = [1, 1999, 333, 2048 + 5, 701, 1, 1500, 37, 900, 17]
    pool = PagePool(sum(-(-n // page_size) for n in lens) + 16, page_size, HK, D, DTYPE, seed)
    return [("decode", Decode(pool, [1, 1999, 333, 2048 + 5], seed + 1)),
            ("decode", Decode(pool, [701], seed + 2)),
            ("paged", PagedPrefill(pool, [1, 1500, 37], seed + 3, [1, 2, 1])),
            ("paged", PagedPrefill(pool, [900, 17], seed + 4, [3, 17]))]


@pytest.mark.parametrize("page_size", [16, 1])
def test_workspace_size_is_exactly_what_plan_needs(page_size):
    for name, case in _cases(page_size, seed=40 + page_size):
        roomy = case.make(_bytes(128 << 20))
        float_bytes, int_bytes = case.size(roomy)
        assert isinstance(float_bytes, int) and isinstance(int_bytes, int)
        assert int_bytes > 0, name
        case.plan(roomy)
        assert _planned_bytes(roomy) == (float_bytes, int_bytes), name
        expected = case.run(roomy)
        check(*expected, *case.reference(), DTYPE)

        # FlashInfer's documented use: buffers of exactly these sizes, then plan().
        exact = case.make(_bytes(128 << 20))
        exact.reset_workspace_buffer(_bytes(float_bytes or 256), _bytes(int_bytes))  # a 0-byte tensor has no address
        case.plan(exact)
        assert _planned_bytes(exact) == (float_bytes, int_bytes), name
        o, lse = case.run(exact)
        torch.cuda.synchronize()
        assert torch.equal(o, expected[0]) and torch.equal(lse, expected[1]), name

        # One byte less of either is refused, naming the buffer.
        if float_bytes:
            small = case.make(_bytes(128 << 20))
            small.reset_workspace_buffer(_bytes(float_bytes - 1), _bytes(int_bytes))
            _too_small(lambda: case.plan(small), "float_workspace_buffer")
        small_int = case.make(_bytes(128 << 20))
        small_int.reset_workspace_buffer(_bytes(128 << 20), _bytes(int_bytes - 1))
        _too_small(lambda: case.plan(small_int), "int_workspace_buffer")


def test_a_query_disturbs_neither_the_plan_before_nor_the_plan_after():
    cases = _cases(16, seed=7)
    for (name, case), (_, other) in zip(cases, cases[1:] + cases[:1]):
        if type(other) is not type(case):
            continue
        w = case.make(_bytes(128 << 20))
        case.plan(w)
        before = _planned_bytes(w)
        expected = case.run(w)
        other.size(w)  # between plan() and run()
        assert _planned_bytes(w) == before, name
        o, lse = case.run(w)
        torch.cuda.synchronize()
        assert torch.equal(o, expected[0]) and torch.equal(lse, expected[1]), name
        fresh = case.make(_bytes(128 << 20))
        other.size(fresh)  # before plan()
        case.plan(fresh)
        o, lse = case.run(fresh)
        torch.cuda.synchronize()
        assert torch.equal(o, expected[0]) and torch.equal(lse, expected[1]), name


def test_cuda_graph_decode_wrapper_sizes_its_fixed_plan():
    pool = PagePool(400, 16, HK, D, DTYPE, 3)
    case = Decode(pool, [50, 1, 1200], 4)
    batch, max_pages = 3, 200
    buffers = dict(paged_kv_indptr_buffer=torch.zeros(batch + 1, dtype=torch.int32, device=DEVICE),
                   paged_kv_indices_buffer=torch.zeros(max_pages, dtype=torch.int32, device=DEVICE),
                   paged_kv_last_page_len_buffer=torch.zeros(batch, dtype=torch.int32, device=DEVICE))
    w = attnjit.BatchDecodeWithPagedKVCacheWrapper(_bytes(128 << 20), "NHD", use_cuda_graph=True, **buffers)
    float_bytes, int_bytes = case.size(w)
    case.plan(w)
    assert _planned_bytes(w) == (float_bytes, int_bytes)
    check(*case.run(w), *case.reference(), DTYPE)
    # The batch size is fixed in CUDA-graph mode, for the query as for plan() (FlashInfer's ValueError).
    with pytest.raises(attnjit.AttnjitError) as info:
        Decode(pool, [5, 6], 5).size(w)
    assert "CUDA-graph" in info.value.message


def test_arguments_attnjit_cannot_honour_are_unsupported_as_in_plan():
    pool = PagePool(64, 16, HK, D, DTYPE, 9)
    for _, case in [("decode", Decode(pool, [40, 3], 1)), ("paged", PagedPrefill(pool, [20, 9], 2, [1, 4]))]:
        w = case.make(_bytes(128 << 20))
        for extra in (dict(fixed_split_size=4), dict(disable_split_kv=True),
                      dict(block_tables=torch.zeros(2, 4, dtype=torch.int32))):
            with pytest.raises(attnjit.AttnjitError) as info:
                case.size(w, **extra)
            assert info.value.status == attnjit.Status.UNSUPPORTED
            assert next(iter(extra)) in info.value.message
        with pytest.raises(attnjit.AttnjitError) as info:  # a wrong index dtype, by name
            w.workspace_size(*[a.long() if isinstance(a, torch.Tensor) else a for a in case.args()],
                             q_data_type=DTYPE)
        assert info.value.status == attnjit.Status.INVALID_ARGUMENT

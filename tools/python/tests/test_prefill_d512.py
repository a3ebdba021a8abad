"""Prefill at head_dim 512 on a GPU against a float64 reference: single_prefill_with_kv_cache and the paged
wrapper (fa2: two CTAs per query tile, each a 256-wide slice of V and O; backend 'fa3' is refused naming
head_dim). Skips without torch and a CUDA device.
"""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import AttnjitError, Status  # noqa: E402
from dense_reference import attention  # noqa: E402
from paged_batch import PagedBatch  # noqa: E402

D = 512
O_TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
LSE_TOL = {torch.float16: 4e-3, torch.bfloat16: 2e-2}


def _check(o, lse, o_ref, lse_ref, dtype):
    err = ((o.double() - o_ref).norm() / o_ref.norm().clamp_min(1e-30)).item()
    assert err <= O_TOL[dtype], err
    finite = torch.isfinite(lse_ref)
    assert torch.equal(torch.isinf(lse.double()) & (lse < 0), ~finite)  # rows that see no key: lse -inf
    assert (lse.double()[finite] - lse_ref[finite]).abs().max().item() <= LSE_TOL[dtype]


# Odd groups (7:1, 3:1), lengths of 1 and off the 32-key tiles, causal with qo_len > kv_len, a short query on a
# long KV (split and merged), HND.
@pytest.mark.parametrize("qo,kv,hq,hk,causal,layout,dtype", [
    (1, 1, 7, 1, True, "NHD", torch.bfloat16),
    (77, 300, 6, 2, True, "HND", torch.bfloat16),
    (130, 95, 3, 1, True, "NHD", torch.float16),
    (200, 333, 4, 4, False, "NHD", torch.float16),
    (3, 9000, 4, 2, True, "NHD", torch.bfloat16),
])
def test_single_prefill_d512(qo, kv, hq, hk, causal, layout, dtype):
    torch.manual_seed(qo * 7 + kv)
    q = torch.randn(qo, hq, D, dtype=dtype, device="cuda")
    k = torch.randn(kv, hk, D, dtype=dtype, device="cuda")
    v = torch.randn(kv, hk, D, dtype=dtype, device="cuda")
    kl, vl = (k, v) if layout == "NHD" else (k.transpose(0, 1).contiguous(), v.transpose(0, 1).contiguous())
    o, lse = attnjit.single_prefill_with_kv_cache(q, kl, vl, causal=causal, kv_layout=layout, return_lse=True)
    assert o.shape == (qo, hq, D)
    o_ref, lse_ref = attention(q, k, v, causal=causal)
    _check(o, lse, o_ref, lse_ref, dtype)


def test_single_prefill_d512_custom_mask_and_window():
    torch.manual_seed(5)
    q = torch.randn(50, 4, D, dtype=torch.float16, device="cuda")
    k = torch.randn(129, 2, D, dtype=torch.float16, device="cuda")
    v = torch.randn(129, 2, D, dtype=torch.float16, device="cuda")
    mask = torch.rand(50, 129, device="cuda") < 0.7
    o, lse = attnjit.single_prefill_with_kv_cache(q, k, v, custom_mask=mask, return_lse=True)
    _check(o, lse, *attention(q, k, v, visible=mask), torch.float16)
    o, lse = attnjit.single_prefill_with_kv_cache(q, k, v, causal=True, window_left=40, return_lse=True)
    _check(o, lse, *attention(q, k, v, causal=True, window_left=40), torch.float16)


def test_fa3_refuses_d512_by_name():
    q = torch.randn(4, 2, D, dtype=torch.float16, device="cuda")
    k = torch.randn(8, 2, D, dtype=torch.float16, device="cuda")
    with pytest.raises(AttnjitError) as e:
        attnjit.single_prefill_with_kv_cache(q, k, k, backend="fa3")
    assert e.value.status == Status.UNSUPPORTED and "head_dim=512" in str(e.value)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_prefill_d512(layout):
    # Page size 5 divides none of the lengths; the last request's 2 queries on 3000 keys; 7:1 group.
    qo_lens, kv_lens, hq, hk, page = [1, 70, 130, 2], [1, 333, 95, 3000], 7, 1, 5
    batch = PagedBatch(kv_lens, page, hk, D, torch.bfloat16, layout, seed=512)
    qo_indptr = torch.tensor([0] + [sum(qo_lens[:i + 1]) for i in range(len(qo_lens))], dtype=torch.int32,
                             device="cuda")
    q = torch.randn(sum(qo_lens), hq, D, dtype=torch.bfloat16, device="cuda")
    workspace = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    wrapper = attnjit.BatchPrefillWithPagedKVCacheWrapper(workspace, layout)
    wrapper.plan(qo_indptr, batch.indptr.cuda(), batch.indices.cuda(), batch.last_page_len.cuda(), hq, hk, D, page,
                 causal=True, q_data_type=torch.bfloat16)
    o, lse = wrapper.run(q, batch.kv, return_lse=True)
    for r in range(len(qo_lens)):
        rows = slice(int(qo_indptr[r]), int(qo_indptr[r + 1]))
        k, v = batch.dense(r)
        o_ref, lse_ref = attention(q[rows], k, v, causal=True)
        _check(o[rows], lse[rows], o_ref, lse_ref, torch.bfloat16)

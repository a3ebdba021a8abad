"""attnjit.single_prefill_with_kv_cache on a GPU against a float64 reference.

Skips without torch and a CUDA device. The reference: query i of qo_len sits
at position kv_len - qo_len + i; causal keeps keys at or before it; a custom
mask (True = attend) replaces causal; o = softmax(q·k * sm_scale) · v and
lse = logsumexp / ln 2 (base 2). A custom mask equal to the causal mask must
give the causal output within 1e-3 (the spec's own check).
"""

import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import AttnjitError, Status  # noqa: E402

TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1e-2}


def reference(q, k, v, causal, mask=None):
    qo, h, d = q.shape
    kv, hk, _ = k.shape
    g = h // hk
    qd, kd, vd = q.double(), k.double().repeat_interleave(g, 1), v.double().repeat_interleave(g, 1)
    s = torch.einsum("qhd,khd->hqk", qd, kd) / math.sqrt(d)
    if mask is None and causal:
        pos = torch.arange(qo, device=q.device)[:, None] + (kv - qo)
        mask = torch.arange(kv, device=q.device)[None, :] <= pos
    if mask is not None:
        s = s.masked_fill(~mask.reshape(qo, kv)[None], float("-inf"))
    lse = torch.logsumexp(s, -1) / math.log(2)
    o = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vd)
    return o, lse.transpose(0, 1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("qo,kv", [(1, 300), (77, 77), (128, 1000)])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_reference(dtype, qo, kv, causal):
    torch.manual_seed(qo + kv)
    q = torch.randn(qo, 8, 128, dtype=dtype, device="cuda")
    k = torch.randn(kv, 2, 128, dtype=dtype, device="cuda")
    v = torch.randn(kv, 2, 128, dtype=dtype, device="cuda")
    o, lse = attnjit.single_prefill_with_kv_cache_return_lse(q, k, v, causal=causal)
    o_ref, lse_ref = reference(q, k, v, causal)
    err = ((o.double() - o_ref).norm() / o_ref.norm()).item()
    assert err <= TOLERANCE[dtype], err
    assert (lse.double() - lse_ref).abs().max().item() <= (2e-2 if dtype == torch.bfloat16 else 4e-3)


def test_custom_mask_equal_to_causal_gives_causal():
    q = torch.randn(33, 8, 128, dtype=torch.float16, device="cuda")
    k = torch.randn(300, 2, 128, dtype=torch.float16, device="cuda")
    v = torch.randn(300, 2, 128, dtype=torch.float16, device="cuda")
    mask = torch.tril(torch.full((33, 300), True, device="cuda"), diagonal=300 - 33)
    o_causal = attnjit.single_prefill_with_kv_cache(q, k, v, causal=True)
    o_custom = attnjit.single_prefill_with_kv_cache(q, k, v, custom_mask=mask.flatten())
    assert torch.allclose(o_custom, o_causal, rtol=1e-3, atol=1e-3)


def test_causal_with_more_queries_than_keys_gives_zero_rows_as_flashinfer():
    """Query i sits at kv_len - qo_len + i: the first qo_len - kv_len rows see no key (o = 0, lse = -inf)."""
    q = torch.randn(10, 8, 128, dtype=torch.float16, device="cuda")
    k = torch.randn(5, 2, 128, dtype=torch.float16, device="cuda")
    v = torch.randn(5, 2, 128, dtype=torch.float16, device="cuda")
    o, lse = attnjit.single_prefill_with_kv_cache(q, k, v, causal=True, return_lse=True)
    assert torch.all(o[:5] == 0) and torch.all(torch.isneginf(lse[:5]))
    qd, kd, vd = (t.double().transpose(0, 1) for t in (q, k, v))  # [heads, rows, d]
    kd, vd = kd.repeat_interleave(4, 0), vd.repeat_interleave(4, 0)
    s = qd @ kd.transpose(1, 2) / 128 ** 0.5
    seen = torch.arange(5, device="cuda")[None, :] <= torch.arange(10, device="cuda")[:, None] - 5
    s = s.masked_fill(~seen, float("-inf"))[:, 5:]
    ref = (torch.softmax(s, -1) @ vd).transpose(0, 1)
    assert torch.linalg.norm(o[5:].double() - ref) / torch.linalg.norm(ref) < 5e-3
    ref_lse = (torch.logsumexp(s, -1) / torch.log(torch.tensor(2.0, dtype=torch.float64))).transpose(0, 1)
    assert (lse[5:].double() - ref_lse).abs().max() < 2e-3


def test_errors_name_the_argument():
    q = torch.randn(10, 8, 128, dtype=torch.float16, device="cuda")
    k = torch.randn(5, 3, 128, dtype=torch.float16, device="cuda")
    with pytest.raises(AttnjitError) as e:
        attnjit.single_prefill_with_kv_cache(q, k, k, causal=True)
    assert e.value.status == Status.INVALID_ARGUMENT and "num_kv_heads=3" in str(e.value)
    k = torch.randn(5, 2, 128, dtype=torch.float16, device="cuda")
    with pytest.raises(AttnjitError) as e:
        attnjit.single_prefill_with_kv_cache(q, k, k, backend="fa4")
    assert e.value.status == Status.INVALID_ARGUMENT and "'fa3'" in str(e.value)


def test_backends_agree():
    """fa3 (Hopper's warpgroup MMA) where the GPU has it, else a clear UNSUPPORTED; fa2 everywhere."""
    torch.manual_seed(3)
    q = torch.randn(300, 8, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(700, 2, 128, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(700, 2, 128, dtype=torch.bfloat16, device="cuda")
    o2 = attnjit.single_prefill_with_kv_cache(q, k, v, causal=True, backend="fa2")
    if torch.cuda.get_device_capability() != (9, 0):
        with pytest.raises(AttnjitError) as e:
            attnjit.single_prefill_with_kv_cache(q, k, v, causal=True, backend="fa3")
        assert e.value.status == Status.UNSUPPORTED and "sm_90a" in str(e.value)
        return
    o3 = attnjit.single_prefill_with_kv_cache(q, k, v, causal=True, backend="fa3")
    assert torch.allclose(o3.float(), o2.float(), rtol=2e-2, atol=2e-2)


def test_one_call_form_records_into_a_cuda_graph():
    # 16 query tokens against 8k keys: the planner splits the KV (a workspace
    # of partial states), which the call takes from torch's allocator, so it
    # captures; the replay then sees new data in the same buffers.
    torch.manual_seed(5)
    q = torch.randn(16, 8, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(8192, 2, 128, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(8192, 2, 128, dtype=torch.bfloat16, device="cuda")
    attnjit.single_prefill_with_kv_cache(q, k, v, causal=True)  # plans and compiles outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = attnjit.single_prefill_with_kv_cache_return_lse(q, k, v, causal=True)
    for x in (q, k, v):
        x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    o_ref, lse_ref = reference(q, k, v, True)
    assert ((o.double() - o_ref).norm() / o_ref.norm()).item() <= 1e-2
    assert (lse.double() - lse_ref).abs().max().item() <= 2e-2

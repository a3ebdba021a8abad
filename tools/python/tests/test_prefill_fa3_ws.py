"""backend='fa3_ws' (the warp-specialized Hopper prefill) from Python: single prefill against a float64
reference and the ragged wrapper against fa2, full and causal, GQA 4:1, lengths off the tiles. Needs torch with
an sm_90 GPU; skips otherwise."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs torch with an sm_90 (Hopper) GPU", allow_module_level=True)

import attnjit  # noqa: E402


def _reference(q, k, v, causal):
    group = q.shape[1] // k.shape[1]
    qd, kd, vd = (t.double().transpose(0, 1) for t in (q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)))
    mask = None
    if causal:  # queries aligned to the end of the keys
        mask = torch.ones(q.shape[0], k.shape[0], dtype=torch.bool, device=q.device).tril(k.shape[0] - q.shape[0])
    return torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask).transpose(0, 1)


def _rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("causal", [False, True])
def test_fa3_ws_single_and_ragged(causal):
    gen = torch.Generator(device="cuda").manual_seed(30)
    q = torch.randn(1500, 32, 128, dtype=torch.bfloat16, device="cuda", generator=gen)
    k = torch.randn(1700, 8, 128, dtype=torch.bfloat16, device="cuda", generator=gen)
    v = torch.randn(1700, 8, 128, dtype=torch.bfloat16, device="cuda", generator=gen)
    o = attnjit.single_prefill_with_kv_cache(q, k, v, causal=causal, backend="fa3_ws")
    assert _rel(o, _reference(q, k, v, causal)) < 1e-2

    workspace = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    wrapper = attnjit.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD", backend="fa3_ws")
    qo_indptr = torch.tensor([0, 700, 1500], dtype=torch.int32, device="cuda")
    kv_indptr = torch.tensor([0, 900, 1700], dtype=torch.int32, device="cuda")
    wrapper.plan(qo_indptr, kv_indptr, 32, 8, 128, causal=causal, q_data_type=torch.bfloat16)
    out = wrapper.run(q, k, v)
    for (q0, q1), (k0, k1) in (((0, 700), (0, 900)), ((700, 1500), (900, 1700))):
        expect = attnjit.single_prefill_with_kv_cache(q[q0:q1], k[k0:k1], v[k0:k1], causal=causal, backend="fa2")
        assert _rel(out[q0:q1], expect) < 1e-2

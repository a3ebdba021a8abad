"""The engine harness's float64 reference and output checks (test_engine_harness.py). Imported after the GPU
tests have skipped without torch or a CUDA device.

Attention of query tokens at given positions against a request's dense K and V (keys at positions 0 .. N-1),
with FlashInfer's variants the engines use: causal, window_left, logits_soft_cap (cap * tanh(s / cap) on the
scaled logit), GQA. lse is base 2 of the final logits; a row that sees no key gets o = 0 and lse = -inf.
"""

import torch

import dense_reference

O_TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}  # relative L2 error of a request's rows
LSE_TOL = {torch.float16: 4e-3, torch.bfloat16: 2e-2}  # absolute error in base 2


def attention(q, k, v, q_positions, causal, window_left=-1, sm_scale=None, soft_cap=0.0):
    """o [T, Hq, D] and lse [T, Hq] in float64 for q [T, Hq, D] at q_positions (T ints) against k, v
    [N, Hk, D]; query head h reads KV head h // (Hq / Hk)."""
    return dense_reference.attention(q, k, v, causal=causal, sm_scale=sm_scale, window_left=window_left,
                                     positions=q_positions, soft_cap=soft_cap)


def check_o(label, o, o_ref, dtype):
    """o (one request's rows) within O_TOL of o_ref in relative L2; exact zeros where o_ref is all zero."""
    assert o.shape == o_ref.shape, f"{label}: o has shape {list(o.shape)}, the reference {list(o_ref.shape)}"
    assert torch.isfinite(o).all(), f"{label}: o has non-finite values"
    ref_norm = o_ref.norm().item()
    if ref_norm == 0.0:
        assert (o == 0).all(), f"{label}: o must be 0 where no key is visible"
        return
    err = ((o.double() - o_ref).norm() / ref_norm).item()
    assert err <= O_TOL[dtype], f"{label}: relative L2 error of o {err:.2e} > {O_TOL[dtype]:.0e}"


def check_lse(label, lse, lse_ref, dtype):
    """lse within LSE_TOL of lse_ref (base 2); -inf exactly where the reference is -inf."""
    assert lse.dtype == torch.float32, f"{label}: lse dtype {lse.dtype}, expected torch.float32"
    assert lse.shape == lse_ref.shape, f"{label}: lse has shape {list(lse.shape)}, the reference {list(lse_ref.shape)}"
    empty = torch.isneginf(lse_ref)
    assert torch.equal(torch.isneginf(lse), empty), f"{label}: lse is -inf at other rows than the reference"
    if (~empty).any():
        got = lse[~empty]
        assert torch.isfinite(got).all(), f"{label}: lse has non-finite values"
        err = (got.double() - lse_ref[~empty]).abs().max().item()
        assert err <= LSE_TOL[dtype], f"{label}: lse error {err:.2e} > {LSE_TOL[dtype]:.0e}"

"""The float64 attention reference of the user-variant tests (test_user_variant.py, test_block_sparse.py): a
score_mod and a mask_mod as torch functions of the head / query-index / key-index tensors, and the relative
Frobenius error they compare with. Imported only after those modules have skipped without torch (or have torch).
"""

import math

import torch


def reference(q, k, v, score=None, visible=None, sm_scale=None):
    """o [T, H, D], lse [T, H] (base 2), float64. score(s, h, i, j) maps the scaled scores [H, T, N] given
    broadcastable head / query-index / key-index tensors; visible(h, i, j) -> bool of the same shape."""
    q, k, v = q.double(), k.double(), v.double()
    t, heads, d = q.shape
    n, hk = k.shape[0], k.shape[1]
    g = heads // hk
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = torch.einsum("thd,nhd->htn", q, k)
    s = s * sm_scale if sm_scale is not None else s / math.sqrt(d)
    h = torch.arange(heads, device=q.device)[:, None, None]
    i = torch.arange(t, device=q.device)[None, :, None]
    j = torch.arange(n, device=q.device)[None, None, :]
    if score is not None:
        s = score(s, h, i, j)
    if visible is not None:
        s = s.masked_fill(~torch.broadcast_to(visible(h, i, j), s.shape), float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return torch.einsum("htn,nhd->thd", p, v), (lse / math.log(2.0)).transpose(0, 1)


def rel(a, b):
    """The relative Frobenius error of a against b (in float64)."""
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()

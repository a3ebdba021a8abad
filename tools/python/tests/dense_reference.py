"""Attention in float64 for the GPU tests that need queries of any length against any keys (prefill, cascade,
decode alike): o and the base-2 lse, FlashInfer's conventions. Imported only after the tests have skipped
without torch or a CUDA device."""

import math

import torch


def attention(q, k, v, causal=False, sm_scale=None, window_left=-1, v_scale=1.0, visible=None, positions=None,
              soft_cap=0.0):
    """o [T, Hq, D] and lse [T, Hq] (base 2), float64, of q [T, Hq, D] against k, v [N, Hk, D] (GQA: query head
    h reads KV head h // (Hq / Hk)).

    causal aligns the queries to the end of the keys: query t sits at position N - T + t and sees keys up to it;
    window_left >= 0 also hides keys more than window_left before that position. visible: a bool [T, N] of
    the keys each query sees, instead of causal / window_left. positions: each query's position (T ints) instead
    of N - T + t. soft_cap > 0: logits cap * tanh(s / cap) of the scaled logit s. A row that sees no key gets
    o = 0 and lse = -inf."""
    q, k, v = q.double(), k.double(), v.double()
    rows, heads, dim = q.shape
    n = k.shape[0]
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(dim)
    s = torch.einsum("thd,nhd->htn", q, k) * scale
    if soft_cap:
        s = soft_cap * torch.tanh(s / soft_cap)
    if positions is not None:
        position = torch.as_tensor(list(positions), device=q.device)[:, None]
    else:
        position = torch.arange(rows, device=q.device)[:, None] + (n - rows)
    key = torch.arange(n, device=q.device)[None, :]
    if visible is not None:
        visible = visible.to(q.device)
        causal, window_left = False, -1
    else:
        visible = torch.ones(rows, n, dtype=torch.bool, device=q.device)
    if causal:
        visible &= key <= position
    if window_left >= 0:
        visible &= key >= position - window_left
    s = s.masked_fill(~visible[None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # [H, T]
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    o = torch.einsum("htn,nhd->thd", p, v) * v_scale
    return o, (lse / math.log(2.0)).transpose(0, 1)

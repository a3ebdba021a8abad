"""attn_implementation="attnjit": transformers' attention function for standard forwards and generate().

Queries come as [batch, heads, q_len, head_dim] views of [batch, q_len, heads, head_dim] storage, so their
rows flatten to attnjit's [batch * q_len, heads, head_dim] without a copy; keys and values (the cache's
tensors, or the projections' views) are read in place through a page table (_pages.py) that starts each
request at its first unpadded key. A step with one query row per request runs batch decode, any other
batch prefill; either writes [batch * q_len, heads, head_dim], which is the [batch, q_len, heads,
head_dim] that sdpa's integration returns. Query rows that see no key (left padding) come out 0.
"""

from ..._dlpack import require_torch
from . import _checks, _mask, _pages, _plans


def _plan_key(query, key, table_ranges, rows_per_request, scaling, softcap, decode):
    return ("decode" if decode else "prefill", str(query.dtype), tuple(query.shape), tuple(key.shape[1:3]),
            rows_per_request, table_ranges.key(), scaling, softcap)


def attnjit_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                              sliding_window=None, softcap=None, is_causal=None, **kwargs):
    """transformers' attention-function contract: returns (attn_output [batch, q_len, heads, head_dim], None)."""
    torch = require_torch()
    _checks.not_compiling(torch)
    _checks.tensors(torch, query, key, value, "[batch, heads, seq_len, head_dim]")
    batch, heads, q_len, head_dim = query.shape
    kv_heads, kv_len = key.shape[1], key.shape[2]
    if key.shape[0] != batch:
        raise _checks.invalid_argument(f"key: batch {key.shape[0]} is not allowed; allowed: {batch} (the query's)")
    scaling, window, softcap = _checks.options(dropout, scaling, sliding_window, softcap, head_dim, kwargs)
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    ranges = _mask.key_ranges(torch, attention_mask, batch, q_len, kv_len, causal, window)
    key, value, rows_per_request, row_stride = _pages.dense_layout(torch, key, value)
    decode = q_len == 1 and ranges.custom is None
    with _plans.LOCK:
        plan_key = _plan_key(query, key, ranges, rows_per_request, scaling, softcap, decode)
        window_left = -1 if ranges.window is None or ranges.custom is not None else ranges.window - 1
        common = dict(window_left=window_left, logits_soft_cap=softcap, sm_scale=scaling,
                      q_data_type=query.dtype, kv_data_type=key.dtype)

        def plan(wrapper):  # host work, on a miss only: the table, then attnjit's plan of it
            table = _pages.dense_table(torch, kv_len, rows_per_request, ranges.starts, ranges.end)
            if decode:
                wrapper.plan(table.indptr, table.indices, table.last_page_len, heads, kv_heads, head_dim,
                             table.page_size, **common)
            else:
                qo_indptr = torch.arange(batch + 1, dtype=torch.int32) * q_len
                wrapper.plan(qo_indptr, table.indptr, table.indices, table.last_page_len, heads, kv_heads, head_dim,
                             table.page_size, causal=ranges.causal, custom_mask=ranges.custom, **common)
            return table.page_size, table.num_pages

        keep = () if ranges.custom is None else (ranges.custom,)
        wrapper, pages = _plans.planned(torch, "decode" if decode else "prefill", plan_key, query.device, plan, keep)
        kv = (_pages.dense_view(torch, key, pages, row_stride), _pages.dense_view(torch, value, pages, row_stride))
        if decode:
            out = wrapper.run(query[:, :, 0], kv)
            _plans.launches["decode"] += 1
        else:
            out = wrapper.run(query.transpose(1, 2).reshape(batch * q_len, heads, head_dim), kv)
            _plans.launches["prefill" if ranges.custom is None else "prefill_custom_mask"] += 1
    return out.view(batch, q_len, heads, head_dim), None

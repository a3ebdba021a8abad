"""attn_implementation="attnjit": transformers' attention function for standard forwards and generate().

Queries come as [batch, heads, q_len, head_dim] views of [batch, q_len, heads, head_dim] storage, so their
rows flatten to attnjit's [batch * q_len, heads, head_dim] without a copy; keys and values (the cache's
tensors, or the projections' views) are read in place. A step with one query row per request runs batch
decode, any other batch prefill; either writes [batch * q_len, heads, head_dim], which is the [batch, q_len,
heads, head_dim] that sdpa's integration returns. Query rows that see no key come out 0.

A prefill reads its mask once (_mask.py: left padding as each request's first key, else a custom mask) and
plans a page table over the keys in place (_pages.py). A decode step reads each request's kv_len keys
whatever its mask, and a mask is asked in the kernel (_decode_mask.py): no mask analysis and no host sync
per step; its plan serves step after step while the keys grow (_decode_steps.py), so a step costs one
device write of its kv_len, not a plan.

Host time is most of a generate() step, so what a call's arguments make of it (the checks' verdict, a
prefill mask's key ranges, the layout, the plan's key) is kept by everything it is read from: the layers of a
step after the first cost a dictionary lookup and the launch.
"""

import collections
import weakref

from ..._dlpack import require_torch
from . import _capacity, _checks, _decode_steps, _mask, _pages, _plans

_PREPARED_MAX = 8  # a step has a few distinct layouts (full and sliding layers); as many as _plans keeps
_prepared = collections.OrderedDict()


def clear():
    """Drops every kept preparation (and the wrappers and masks its launches hold)."""
    with _plans.LOCK:
        _prepared.clear()
        _decode_steps.clear()


def _plan_key(path, query, key, rows_per_request, table, scaling, softcap):
    return (path, str(query.dtype), tuple(query.shape), tuple(key.shape[1:3]), rows_per_request, table, scaling,
            softcap)


class _Prepared:
    """What one signature of arguments makes of a call (see _signature). path: "prefill",
    "prefill_custom_mask", "decode" (no mask) or "decode_mask_mod" (a mask, asked in the kernel). A decode
    keeps its step plan's key, kv_len and launch layout; a prefill its table's layout and plan."""

    __slots__ = ("mask_ref", "path", "decode", "copy", "rows_per_request", "row_stride", "plan_key", "plan",
                 "keep", "step", "kv_len", "layout")


def _signature(query, key, value, attention_mask, dropout, scaling, sliding_window, softcap, is_causal, module):
    """Everything the checks, the key ranges, the layout and the plan read from a call's arguments (types
    beside values where an int and a bool or float would compare equal), or None for arguments that are not
    all tensors (the checks then name the one that is not)."""
    try:
        tensors = (query.shape, query.stride(), query.dtype, query.device, key.shape, key.stride(), key.dtype,
                   key.device, value.shape, value.stride(), value.dtype, value.device)
        mask = None if attention_mask is None else (id(attention_mask), attention_mask._version)
        options = (dropout, type(dropout), scaling, type(scaling), sliding_window, type(sliding_window), softcap,
                   type(softcap), is_causal, getattr(module, "is_causal", True))
        signature = (tensors, mask, options)
        hash(signature)  # an unhashable option: no signature (the checks refuse it by name)
        return signature
    except (AttributeError, TypeError):
        return None


def _prepare(torch, module, query, key, value, attention_mask, dropout, scaling, sliding_window, softcap, is_causal,
             kwargs):
    """The checks and everything the plan needs, for a signature seen for the first time."""
    _checks.tensors(torch, query, key, value, "[batch, heads, seq_len, head_dim]")
    batch, heads, q_len, head_dim = query.shape
    kv_heads, kv_len = key.shape[1], key.shape[2]
    if key.shape[0] != batch:
        raise _checks.invalid_argument(f"key: batch {key.shape[0]} is not allowed; allowed: {batch} (the query's)")
    scaling, window, softcap = _checks.options(dropout, scaling, sliding_window, softcap, head_dim, kwargs)
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    p = _Prepared()
    p.mask_ref = None if attention_mask is None else weakref.ref(attention_mask)
    if q_len == 1:
        return _prepare_decode(torch, p, query, key, value, attention_mask, scaling, window, softcap)
    laid_key, laid_value, rows_per_request, row_stride = _pages.dense_layout(torch, key, value)
    p.copy = laid_key is not key
    p.rows_per_request, p.row_stride = rows_per_request, row_stride
    common = dict(logits_soft_cap=softcap, sm_scale=scaling, q_data_type=query.dtype, kv_data_type=key.dtype)
    ranges = _mask.key_ranges(torch, attention_mask, batch, q_len, kv_len, causal, window)
    p.decode = False
    p.path = "prefill" if ranges.custom is None else "prefill_custom_mask"
    p.plan_key = _plan_key(p.path, query, laid_key, rows_per_request, ranges.key(), scaling, softcap)
    p.keep = () if ranges.custom is None else (ranges.custom,)
    common["window_left"] = -1 if ranges.window is None or ranges.custom is not None else ranges.window - 1

    def plan(wrapper):  # host work, on a miss only: the table, then attnjit's plan of it
        table = _pages.dense_table(torch, kv_len, rows_per_request, ranges.starts, ranges.end)
        qo_indptr = torch.arange(batch + 1, dtype=torch.int32) * q_len
        wrapper.plan(qo_indptr, table.indptr, table.indices, table.last_page_len, heads, kv_heads, head_dim,
                     table.page_size, causal=ranges.causal, custom_mask=ranges.custom, **common)
        return table.page_size, table.num_pages

    p.plan = plan
    return p


def _prepare_decode(torch, p, query, key, value, attention_mask, scaling, window, softcap):
    """A one-row step: its step plan's key (no kv_len in it), kv_len, and the launch layout of K/V in place
    (contiguous copies only for strides the kernels cannot follow; transformers' never need one)."""
    batch, _, _, _ = query.shape
    kv_heads, kv_len = key.shape[1], key.shape[2]
    for name, t in (("key", key), ("value", value)):
        if t.stride(-1) != 1:
            raise _checks.invalid_argument(f"{name}: stride {list(t.stride())} is not allowed; allowed: head_dim "
                                   "contiguous (stride 1)")
    masked = attention_mask is not None
    if masked:
        _mask.check_mask(torch, attention_mask, batch, 1, kv_len, query.device)
    size = key.element_size()
    k_strides, v_strides = (_capacity.page_strides(t.shape, t.stride(), size) for t in (key, value))
    p.copy = k_strides is None or v_strides is None
    if p.copy:  # the contiguous copies the call makes
        k_strides = v_strides = _capacity.page_strides(key.shape, _capacity.contiguous_strides(key.shape), size)
    p.decode, p.path, p.keep = True, "decode_mask_mod" if masked else "decode", ()
    # A mask decides every key, as sdpa's does (transformers builds the window into a sliding layer's mask), so
    # the kernel applies no window of its own; the window stays in the key so that sliding and full layers keep
    # a plan (and a bound mask) each. Without a mask the kernel applies the window (every key otherwise).
    window_left = -1 if window is None or masked else window - 1
    p.step = _decode_steps.StepKey(query, kv_heads, window_left, scaling, softcap, masked, window if masked else None)
    p.kv_len = kv_len
    p.layout = _decode_steps.Layout(query, kv_heads, k_strides, v_strides)
    return p


def _prepared_for(torch, module, query, key, value, attention_mask, dropout, scaling, sliding_window, softcap,
                  is_causal, kwargs):
    signature = _signature(query, key, value, attention_mask, dropout, scaling, sliding_window, softcap, is_causal,
                           module)
    if signature is not None:
        p = _prepared.get(signature)
        # A mask is known by its identity: the weak reference tells the same live mask from a new one at its address.
        if p is not None and (p.mask_ref is None or p.mask_ref() is attention_mask):
            _prepared.move_to_end(signature)
            return p
    p = _prepare(torch, module, query, key, value, attention_mask, dropout, scaling, sliding_window, softcap,
                 is_causal, kwargs)
    if signature is not None:
        _prepared[signature] = p
        if len(_prepared) > _PREPARED_MAX:
            _prepared.popitem(last=False)
    return p


def attnjit_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                              sliding_window=None, softcap=None, is_causal=None, **kwargs):
    """transformers' attention-function contract: returns (attn_output [batch, q_len, heads, head_dim], None)."""
    torch = require_torch()
    _checks.not_compiling(torch)
    if kwargs:
        _checks.model_kwargs(kwargs)
    with _plans.LOCK:
        p = _prepared_for(torch, module, query, key, value, attention_mask, dropout, scaling, sliding_window, softcap,
                          is_causal, kwargs)
        _checks.grad(torch, query)
        batch, heads, q_len, head_dim = query.shape
        if p.copy:
            key, value = key.contiguous(), value.contiguous()
        if p.decode:
            plan = _decode_steps.plan_for(torch, p.step)
            pdl = plan.ready(torch, p.kv_len, attention_mask)
            out = plan.run(torch, p.layout.at(plan.state.capacity), query, key, value, pdl)
            _plans.launches[p.path] += 1
            return out, None  # [batch, 1, heads, head_dim]
        wrapper, pages = _plans.planned(torch, "prefill", p.plan_key, query.device, p.plan, p.keep)
        kv = (_pages.dense_view(torch, key, pages, p.row_stride), _pages.dense_view(torch, value, pages, p.row_stride))
        out = wrapper.run(query.transpose(1, 2).reshape(batch * q_len, heads, head_dim), kv)
        _plans.launches[p.path] += 1
    return out.view(batch, q_len, heads, head_dim), None

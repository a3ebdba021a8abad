"""attn_implementation="paged|attnjit": the attention function of transformers' continuous batching
(generate_batch / init_continuous_batching).

Continuous batching packs the step's requests into one row of tokens: query [1, heads, tokens, head_dim],
the new key/value [1, kv_heads, tokens, head_dim], with cu_seq_lens_q / cu_seq_lens_k (per layer type)
giving each request's query and key counts, and per cache group the slots to write the new tokens to
(write_index) and to read each request's keys from (read_index). Full-attention layers write the new
tokens into the cache and read the keys where they lie (pages of the cache's blocks, or of one slot);
sliding-window layers, whose ring of blocks a chunk may overwrite while still reading it, and steps with
nothing cached yet take the keys cache.update() returns (as the flash path does). Every request's query
rows are causal to the end of its keys (bottom-right), with window_left = sliding_window - 1.
"""

from ..._args import unsupported
from ..._dlpack import require_torch
from ...errors import invalid_argument
from . import _checks, _pages, _plans


def _identity(t):
    """What a plan keyed on a host-read tensor depends on, without reading it: the object (kept alive with
    the plan), its in-place writes (_version) and its extent."""
    return id(t), t._version, t.data_ptr(), tuple(t.shape)


def _host(torch, t):
    return t.detach().to("cpu", torch.int64)


def attnjit_paged_attention_forward(module, query, key, value, attention_mask, cache=None, cu_seq_lens_q=None,
                                    cu_seq_lens_k=None, max_seqlen_q=None, max_seqlen_k=None, block_table=None,
                                    read_index=None, write_index=None, dropout=0.0, scaling=None,
                                    sliding_window=None, softcap=None, **kwargs):
    """transformers' paged attention contract: returns (attn_output [1, tokens, heads, head_dim], None)."""
    torch = require_torch()
    if cache is None:
        raise invalid_argument("cache=None is not allowed: 'paged|attnjit' serves transformers' continuous "
                               "batching, which passes its PagedAttentionCache; allowed: that cache (for a "
                               "standard forward use attn_implementation='attnjit')")
    if block_table is not None:
        raise unsupported("block_table: the decode fast path (flash_attn_with_kvcache's) is not supported; "
                          "allowed: None (ContinuousBatchingConfig(max_blocks_per_request=0))")
    if attention_mask is not None:
        raise unsupported("attention_mask: a 4-D mask for continuous batching is not supported: attnjit reads "
                          "the request boundaries from cu_seq_lens_q / cu_seq_lens_k; allowed: None")
    if cu_seq_lens_q is None or cu_seq_lens_k is None or read_index is None or write_index is None:
        raise invalid_argument("cu_seq_lens_q, cu_seq_lens_k, read_index and write_index are required with "
                               "'paged|attnjit' (continuous batching's arguments); allowed: tensors")
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise unsupported("CUDA-graph capture of a continuous-batching step is not supported: attnjit plans each "
                          "step on the host; allowed: ContinuousBatchingConfig(use_cuda_graph=False)")
    _checks.not_compiling(torch)
    _checks.tensors(torch, query, key, value, "[1, heads, tokens, head_dim]")
    if query.shape[0] != 1:
        raise invalid_argument(f"query: shape {list(query.shape)} is not allowed; allowed: [1, heads, tokens, "
                               "head_dim] (continuous batching packs the requests into one row)")
    _, heads, tokens, head_dim = query.shape
    kv_heads = key.shape[1]
    window = sliding_window if sliding_window is not None else (getattr(module, "sliding_window", None) or None)
    scaling, window, softcap = _checks.options(dropout, scaling, window, softcap, head_dim, kwargs)
    layer_type = "sliding_attention" if window else "full_attention"
    if isinstance(cu_seq_lens_k, dict):
        cu_seq_lens_k = cu_seq_lens_k[layer_type]
    layer_idx = module.layer_idx
    group, in_group = cache.layer_index_to_group_indices[layer_idx]
    reads = read_index[group]
    in_place = reads.numel() > 0 and cache.sliding_windows[layer_idx] == 1

    with _plans.LOCK:
        if in_place:
            k_cache, v_cache = cache.key_cache[in_group], cache.value_cache[in_group]
            writes = write_index[group]
            k_cache.index_copy_(0, writes, key[0].transpose(0, 1))
            v_cache.index_copy_(0, writes, value[0].transpose(0, 1))
        else:
            k_cache, v_cache = cache.update(key_states=key, value_states=value, layer_idx=layer_idx,
                                            read_index=read_index, write_index=write_index)
        watched = (cu_seq_lens_q, cu_seq_lens_k) + ((reads,) if in_place else ())
        plan_key = ("paged", in_place, cache.block_size if in_place else k_cache.shape[0], str(query.dtype), heads,
                    kv_heads, head_dim, scaling, window, softcap) + tuple(_identity(t) for t in watched)

        def plan(wrapper):
            qo_indptr, kv_indptr = _host(torch, cu_seq_lens_q), _host(torch, cu_seq_lens_k)
            if in_place:
                table = _pages.slot_table(torch, _host(torch, reads), kv_indptr, cache.block_size)
            else:
                table = _pages.slot_table(torch, torch.arange(int(kv_indptr[-1]), dtype=torch.int64), kv_indptr, 1)
            rows = int(qo_indptr[-1])
            if rows > tokens:
                raise invalid_argument(f"cu_seq_lens_q: {rows} query tokens is not allowed; allowed: at most the "
                                       f"query's {tokens}")
            wrapper.plan(qo_indptr.to(torch.int32), table.indptr, table.indices, table.last_page_len, heads,
                         kv_heads, head_dim, table.page_size, causal=True,
                         window_left=-1 if window is None else window - 1, logits_soft_cap=softcap,
                         sm_scale=scaling, q_data_type=query.dtype, kv_data_type=key.dtype)
            return table.page_size, rows

        wrapper, (page_size, rows) = _plans.planned(torch, "prefill", plan_key, query.device, plan, watched)
        q = query[0].transpose(0, 1)  # [tokens, heads, head_dim], a view
        out = torch.zeros((tokens, heads, head_dim), dtype=query.dtype, device=query.device)
        wrapper.run(q[:rows], (_pages.rows_view(torch, k_cache, page_size),
                                   _pages.rows_view(torch, v_cache, page_size)),
                    out=out[:rows])
        _plans.launches["paged_in_place" if in_place else "paged_gathered"] += 1
    return out.unsqueeze(0), None

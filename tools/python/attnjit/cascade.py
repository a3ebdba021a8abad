"""FlashInfer 0.7.2's flashinfer.cascade: the attention-state merges and the cascade wrappers, built from the
paged prefill / decode wrappers, single prefill and merge_state_in_place.

A cascade splits each request's KV into levels (a prefix shared by many
requests, then each request's own pages), attends each level separately and
merges the partial states: V and base-2 lse of disjoint KV ranges merge into
those of their union.
"""

from . import _args as checks
from ._dlpack import require_torch
from .batch_decode import BatchDecodeWithPagedKVCacheWrapper
from .batch_prefill import BatchPrefillWithPagedKVCacheWrapper, metadata_in_float_workspace
from .errors import invalid_argument
from .merge_state import merge_state, merge_state_in_place, merge_states
from .prefill import single_prefill_with_kv_cache

__all__ = ["BatchDecodeWithSharedPrefixPagedKVCacheWrapper", "BatchPrefillWithSharedPrefixPagedKVCacheWrapper",
           "MultiLevelCascadeAttentionWrapper", "merge_state", "merge_state_in_place", "merge_states"]

_ALIGN = 256  # bytes: each level's share of the workspace starts on this boundary


def _per_level(name, values, num_levels):
    """A list of one entry per level (FlashInfer zips them strictly)."""
    if not isinstance(values, (list, tuple)) or len(values) != num_levels:
        count = len(values) if isinstance(values, (list, tuple)) else type(values).__name__
        raise invalid_argument(f"{name}: {count} entries is not allowed; allowed: a list of num_levels = "
                               f"{num_levels} entries, one per level")
    return list(values)


def _level_workspaces(torch, float_workspace_buffer, num_levels):
    """The float workspace each level's wrapper plans on. Where the library keeps a plan's index arrays in the
    float workspace (attnjit_batch_prefill_t does), the levels, all planned before any runs, must not share it:
    each gets its own aligned slice; otherwise all share the whole buffer, as in FlashInfer."""
    checks.workspace(torch, "float_workspace_buffer", float_workspace_buffer)
    if num_levels == 1 or not metadata_in_float_workspace():
        return [float_workspace_buffer] * num_levels
    flat = float_workspace_buffer.view(-1).view(torch.uint8)
    share = (flat.numel() // num_levels) // _ALIGN * _ALIGN
    start = (-flat.data_ptr()) % _ALIGN
    if share - start <= 0:
        raise invalid_argument(f"float_workspace_buffer: {flat.numel()} bytes is not allowed for {num_levels} "
                               "levels; allowed: a larger buffer (128 MiB is plenty)")
    return [flat[start + i * share: start + (i + 1) * share - _ALIGN] for i in range(num_levels)]


class MultiLevelCascadeAttentionWrapper:
    """Attention over num_levels KV levels (FlashInfer's cascade inference): one paged prefill wrapper per
    level; run() merges the levels' states. The last level is causal when plan() asks; the others are not."""

    def __init__(self, num_levels, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False,
                 qo_indptr_buf_arr=None, paged_kv_indptr_buf_arr=None, paged_kv_indices_buf_arr=None,
                 paged_kv_last_page_len_buf_arr=None):
        torch = require_torch()
        checks.positive_int("num_levels", num_levels)
        self._use_cuda_graph = bool(checks.flag("use_cuda_graph", use_cuda_graph))
        arrays = {"qo_indptr_buf_arr": qo_indptr_buf_arr, "paged_kv_indptr_buf_arr": paged_kv_indptr_buf_arr,
                  "paged_kv_indices_buf_arr": paged_kv_indices_buf_arr,
                  "paged_kv_last_page_len_buf_arr": paged_kv_last_page_len_buf_arr}
        if self._use_cuda_graph:
            arrays = {name: _per_level(name, value, num_levels) for name, value in arrays.items()}
        else:
            for name, value in arrays.items():
                if value is not None:
                    raise invalid_argument(f"{name}: is given but use_cuda_graph=False; allowed: None (the fixed "
                                           "buffers serve CUDA-graph mode only)")
            arrays = {name: [None] * num_levels for name in arrays}
        workspaces = _level_workspaces(torch, float_workspace_buffer, num_levels)
        self._batch_prefill_wrappers = [
            BatchPrefillWithPagedKVCacheWrapper(
                workspaces[i], kv_layout, use_cuda_graph=self._use_cuda_graph,
                qo_indptr_buf=arrays["qo_indptr_buf_arr"][i], paged_kv_indptr_buf=arrays["paged_kv_indptr_buf_arr"][i],
                paged_kv_indices_buf=arrays["paged_kv_indices_buf_arr"][i],
                paged_kv_last_page_len_buf=arrays["paged_kv_last_page_len_buf_arr"][i])
            for i in range(num_levels)]
        self._num_levels = num_levels
        self._kv_layout = kv_layout

    @property
    def is_cuda_graph_enabled(self):
        return self._use_cuda_graph

    def check(self):
        """Every level's check(): raises a bad device-table entry a level's kernels met."""
        for wrapper in self._batch_prefill_wrappers:
            wrapper.check()

    def reset_workspace_buffer(self, float_workspace_buffer, int_workspace_buffers):
        """New workspaces: the float one for every level, one int workspace per level. Call plan() again."""
        torch = require_torch()
        int_workspace_buffers = _per_level("int_workspace_buffers", int_workspace_buffers, self._num_levels)
        workspaces = _level_workspaces(torch, float_workspace_buffer, self._num_levels)
        for wrapper, float_buffer, int_buffer in zip(self._batch_prefill_wrappers, workspaces, int_workspace_buffers):
            wrapper.reset_workspace_buffer(float_buffer, int_buffer)

    def plan(self, qo_indptr_arr, paged_kv_indptr_arr, paged_kv_indices_arr, paged_kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim, page_size, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
             sm_scale=None, window_left=-1, logits_soft_cap=None, rope_scale=None, rope_theta=None,
             q_data_type="float16", kv_data_type=None):
        """Plans every level: each argument ending in _arr (and paged_kv_last_page_len) is a list with one
        entry per level, each as BatchPrefillWithPagedKVCacheWrapper.plan() takes it."""
        levels = zip(self._batch_prefill_wrappers, _per_level("qo_indptr_arr", qo_indptr_arr, self._num_levels),
                     _per_level("paged_kv_indptr_arr", paged_kv_indptr_arr, self._num_levels),
                     _per_level("paged_kv_indices_arr", paged_kv_indices_arr, self._num_levels),
                     _per_level("paged_kv_last_page_len", paged_kv_last_page_len, self._num_levels))
        for i, (wrapper, qo_indptr, kv_indptr, kv_indices, last_page_len) in enumerate(levels):
            wrapper.plan(qo_indptr, kv_indptr, kv_indices, last_page_len, num_qo_heads, num_kv_heads, head_dim,
                         page_size, causal=causal if i == self._num_levels - 1 else False,
                         pos_encoding_mode=pos_encoding_mode, use_fp16_qk_reduction=use_fp16_qk_reduction,
                         sm_scale=sm_scale, window_left=window_left, logits_soft_cap=logits_soft_cap,
                         rope_scale=rope_scale, rope_theta=rope_theta, q_data_type=q_data_type,
                         kv_data_type=kv_data_type)

    begin_forward = plan

    def prewarm_paged_kv_stride_variant(self, variant="independent"):
        for wrapper in self._batch_prefill_wrappers:
            wrapper.prewarm_paged_kv_stride_variant(variant)

    def run(self, q, paged_kv_cache):
        """o [qo tokens, num_qo_heads, head_dim] of attention over every level's KV."""
        out, lse = self._batch_prefill_wrappers[-1].run(q, paged_kv_cache, return_lse=True)
        for wrapper in self._batch_prefill_wrappers[:-1]:
            out_level, lse_level = wrapper.run(q, paged_kv_cache, return_lse=True)
            merge_state_in_place(out, lse, out_level, lse_level)
        return out

    forward = run


class _SharedPrefixWrapper:
    """What both shared-prefix wrappers do: plan and check the requests' own pages through one paged wrapper, and
    merge its states with single prefill's over the shared prefix."""

    def __init__(self, unique_pages_wrapper, kv_layout):
        self._unique_pages = unique_pages_wrapper
        self._kv_layout = kv_layout

    def reset_workspace_buffer(self, float_workspace_buffer, int_workspace_buffer):
        self._unique_pages.reset_workspace_buffer(float_workspace_buffer, int_workspace_buffer)

    def check(self):
        """The unique pages' wrapper's check() (the shared prefix has no device table)."""
        self._unique_pages.check()

    def _merged_with_prefix(self, q, k_shared, v_shared, unique_states, **prefill_args):
        """o of q against the shared prefix (single prefill, not causal) merged with unique_states() (o, lse of
        the requests' own pages), which runs second, as it always has."""
        v_shared_state, s_shared = single_prefill_with_kv_cache(
            q, k_shared, v_shared, causal=False, pos_encoding_mode="NONE", kv_layout=self._kv_layout,
            return_lse=True, **prefill_args)
        v_unique, s_unique = unique_states()
        merge_state_in_place(v_shared_state, s_shared, v_unique, s_unique)
        return v_shared_state


class BatchDecodeWithSharedPrefixPagedKVCacheWrapper(_SharedPrefixWrapper):
    """Decode for a batch whose requests share a KV prefix (k_shared, v_shared) and each have their own pages:
    single prefill of every query against the shared prefix, batch decode against each request's pages,
    merged."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD"):
        super().__init__(BatchDecodeWithPagedKVCacheWrapper(float_workspace_buffer, kv_layout), kv_layout)

    def begin_forward(self, unique_kv_indptr, unique_kv_indices, unique_kv_last_page_len, num_qo_heads, num_kv_heads,
                      head_dim, page_size, data_type="float16"):
        """Plans the requests' own pages (the shared prefix needs no plan)."""
        self._unique_pages.begin_forward(unique_kv_indptr, unique_kv_indices, unique_kv_last_page_len,
                                         num_qo_heads, num_kv_heads, head_dim, page_size,
                                         pos_encoding_mode="NONE", data_type=data_type)

    def forward(self, q, k_shared, v_shared, unique_kv_cache):
        """o [batch, num_qo_heads, head_dim]: q [batch, num_qo_heads, head_dim] against the shared prefix
        k_shared, v_shared ([prefix_len, num_kv_heads, head_dim] in NHD) and each request's pages."""
        decode = self._unique_pages
        return self._merged_with_prefix(
            q, k_shared, v_shared, lambda: decode.forward_return_lse(q, unique_kv_cache, pos_encoding_mode="NONE"),
            sm_scale=decode._sm_scale, rope_scale=decode._rope_scale, rope_theta=decode._rope_theta)


class BatchPrefillWithSharedPrefixPagedKVCacheWrapper(_SharedPrefixWrapper):
    """Prefill / append for a batch whose requests share a KV prefix (k_shared, v_shared) and each have their
    own pages: single prefill against the prefix, batch prefill against each request's pages, merged."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD"):
        super().__init__(BatchPrefillWithPagedKVCacheWrapper(float_workspace_buffer, kv_layout), kv_layout)

    def begin_forward(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
                      num_kv_heads, head_dim, page_size):
        """Plans the requests' own pages (the shared prefix needs no plan)."""
        self._unique_pages.begin_forward(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
                                         num_qo_heads, num_kv_heads, head_dim, page_size)

    def prewarm_paged_kv_stride_variant(self, variant="independent"):
        self._unique_pages.prewarm_paged_kv_stride_variant(variant)

    def forward(self, q, k_shared, v_shared, unique_kv_cache, causal=False, use_fp16_qk_reduction=False,
                sm_scale=None, rope_scale=None, rope_theta=None):
        """o [qo tokens, num_qo_heads, head_dim]: every query token against the shared prefix (not causal) and
        against its own request's pages (causal when asked)."""
        scales = dict(sm_scale=sm_scale, rope_scale=rope_scale, rope_theta=rope_theta)
        return self._merged_with_prefix(
            q, k_shared, v_shared,
            lambda: self._unique_pages.forward_return_lse(q, unique_kv_cache, causal=causal, pos_encoding_mode="NONE",
                                                          use_fp16_qk_reduction=use_fp16_qk_reduction, **scales),
            use_fp16_qk_reduction=use_fp16_qk_reduction, **scales)

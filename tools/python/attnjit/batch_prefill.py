"""BatchPrefillWithRaggedKVCacheWrapper and BatchPrefillWithPagedKVCacheWrapper
with FlashInfer's names and arguments, over the C API.

plan() copies the index arrays to the host (as FlashInfer's plan does), plans
and uploads them into the workspace on torch's current stream; run() only
launches, so it can be captured in a CUDA graph after plan(). The workspace is
``float_workspace_buffer`` (uint8, on the device); the plan's partial states
and index arrays both live in it. With ``use_cuda_graph=True`` the index
arrays go into the caller's ``*_buf`` tensors instead and the launch is fixed,
so a graph captured once replays whatever the latest plan() planned (batch
size up to the buffers' size). numpy and torch are imported inside the calls.
"""

import ctypes

from . import _runtime
from ._dlpack import Borrowed
from ._library import check, lib
from .decode import _KV_LAYOUTS
from .errors import AttnjitError, Status, invalid_argument
from .prefill import _options

_DTYPES = {"float16": "float16", "bfloat16": "bfloat16", "half": "float16"}
# fp8 K/V (widened in the kernel; run()'s k_scale / v_scale calibrate them).
_KV_DTYPES = {**_DTYPES, "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def _dtype_name(d, names=_DTYPES):
    import torch

    if isinstance(d, torch.dtype):
        d = str(d).replace("torch.", "")
    if d not in names:
        raise invalid_argument(f"data type {d!r} is not supported; allowed: {', '.join(sorted(set(names.values())))}")
    return names[d]


def _scale(value, name):
    """run()'s fp8 calibration scale: None (1) or a positive float; the C API reads 0 as none."""
    if value is None:
        return 0.0
    value = float(value)
    if not value > 0.0:
        raise invalid_argument(f"{name}={value} is not allowed; allowed: a finite value > 0 (or None: 1)")
    return value


def _host_int32(t, name):
    import numpy as np
    import torch

    a = t.detach().to("cpu", torch.int32).contiguous().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, np.int32)
    if a.ndim != 1:
        raise invalid_argument(f"{name}: {a.ndim} dimensions is not allowed; allowed: 1")
    return np.ascontiguousarray(a, dtype=np.int32)


def _ptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)) if a is not None and a.size else None


# The CUDA-graph buffers in the C API's order (the paged wrapper's kv
# indptr buffer is called paged_kv_indptr_buf).
_GRAPH_BUFFERS = ("qo_indptr_buf", "kv_indptr_buf", "paged_kv_indices_buf", "paged_kv_last_page_len_buf",
                  "custom_mask_buf", "qk_indptr_buf")


class _BatchPrefill:
    def __init__(self, paged, float_workspace_buffer, kv_layout, use_cuda_graph, backend, graph_buffers):
        if kv_layout not in _KV_LAYOUTS:
            raise invalid_argument(f"kv_layout={kv_layout!r} is not a KV layout; allowed: NHD, HND")
        self._paged = paged
        self._kv_layout = kv_layout
        self._backend = backend
        self._workspace = float_workspace_buffer
        # With use_cuda_graph, plan() writes the index arrays into these
        # (held here so they outlive the handle); without it FlashInfer
        # ignores them, and so do we.
        self._use_cuda_graph = bool(use_cuda_graph)
        self._graph_buffers = graph_buffers if self._use_cuda_graph else {}
        self._handle = None
        self._make()
        self._num_qo_heads = self._head_dim = None

    @property
    def is_cuda_graph_enabled(self):
        return self._use_cuda_graph

    def _make(self):
        ws = self._workspace
        h = ctypes.c_void_p()
        with Borrowed() as borrowed:
            bufs = [borrowed.optional(self._graph_buffers.get(name), name) for name in _GRAPH_BUFFERS]
            check(lib().attnjit_batch_prefill_create_v2(
                _runtime.handle(), int(self._paged), ctypes.c_void_p(ws.data_ptr()), ws.numel() * ws.element_size(),
                _KV_LAYOUTS[self._kv_layout], self._backend.encode(), ws.device.index or 0,
                int(self._use_cuda_graph), *bufs, ctypes.byref(h)))
        if self._handle is not None:
            lib().attnjit_batch_prefill_destroy(self._handle)
        self._handle = h

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            lib().attnjit_batch_prefill_destroy(self._handle)
            self._handle = None

    def reset_workspace_buffer(self, float_workspace_buffer, int_workspace_buffer=None):
        """A new workspace (the int buffer is not needed: the arrays share it). Call plan() again."""
        self._workspace = float_workspace_buffer
        self._make()

    def _plan(self, qo_indptr, kv_indptr, page_indices, last_page_len, page_size, num_qo_heads, num_kv_heads,
              head_dim, custom_mask, packed_custom_mask, causal, pos_encoding_mode, allow_fp16_qk_reduction, sm_scale,
              window_left, logits_soft_cap, rope_scale, rope_theta, q_data_type, kv_data_type, kv_lens):
        import numpy as np
        import torch

        options = _options(causal, self._kv_layout, pos_encoding_mode, allow_fp16_qk_reduction, window_left,
                           logits_soft_cap, sm_scale, rope_scale, rope_theta, self._backend)
        qo = _host_int32(qo_indptr, "qo_indptr")
        kv = _host_int32(kv_indptr, "kv_indptr")
        mask = None
        if packed_custom_mask is not None:
            # FlashInfer's segment packing: each request's block from a byte boundary.
            packed = packed_custom_mask.detach().to("cpu", torch.uint8).numpy()
            parts, at = [], 0
            for b in range(len(qo) - 1):
                n = int(qo[b + 1] - qo[b]) * int(kv_lens[b])
                nbytes = (n + 7) // 8
                parts.append(np.unpackbits(packed[at:at + nbytes], bitorder="little")[:n])
                at += nbytes
            mask = np.ascontiguousarray(np.concatenate(parts) if parts else np.zeros(0, np.uint8), dtype=np.uint8)
        elif custom_mask is not None:
            mask = np.ascontiguousarray(custom_mask.detach().reshape(-1).to("cpu", torch.bool).numpy(), dtype=np.uint8)
        q_name = _dtype_name(q_data_type)
        kv_name = _dtype_name(kv_data_type, _KV_DTYPES) if kv_data_type is not None else q_name
        with torch.cuda.device(self._workspace.device):
            stream = torch.cuda.current_stream(self._workspace.device).cuda_stream
            check(lib().attnjit_batch_prefill_plan(
                self._handle, _ptr(qo), _ptr(kv), len(qo) - 1, _ptr(page_indices),
                0 if page_indices is None else page_indices.size, _ptr(last_page_len), page_size, num_qo_heads,
                num_kv_heads, head_dim, ctypes.byref(options), q_name.encode(), kv_name.encode(),
                None if mask is None else mask.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)),
                0 if mask is None else mask.size, stream))
        self._num_qo_heads, self._head_dim = num_qo_heads, head_dim

    def _run(self, q, k, v, return_lse, k_scale=None, v_scale=None):
        import torch

        if self._num_qo_heads is None:
            raise AttnjitError(Status.NOT_PLANNED, "run() before plan(): call plan(...) first")
        o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device) if return_lse else None
        with Borrowed() as borrowed, torch.cuda.device(q.device):
            stream = torch.cuda.current_stream(q.device).cuda_stream
            check(lib().attnjit_batch_prefill_run_v2(
                self._handle, borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v"),
                borrowed.tensor(o, "o"), borrowed.optional(lse, "lse"), _scale(k_scale, "k_scale"),
                _scale(v_scale, "v_scale"), stream))
        return (o, lse) if return_lse else o


class BatchPrefillWithRaggedKVCacheWrapper(_BatchPrefill):
    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 kv_indptr_buf=None, custom_mask_buf=None, qk_indptr_buf=None, backend="auto"):
        super().__init__(False, float_workspace_buffer, kv_layout, use_cuda_graph, backend,
                         {"qo_indptr_buf": qo_indptr_buf, "kv_indptr_buf": kv_indptr_buf,
                          "custom_mask_buf": custom_mask_buf, "qk_indptr_buf": qk_indptr_buf})

    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim, custom_mask=None,
             packed_custom_mask=None, causal=False, pos_encoding_mode="NONE", allow_fp16_qk_reduction=False,
             sm_scale=None, window_left=-1, logits_soft_cap=None, rope_scale=None, rope_theta=None,
             q_data_type="float16", kv_data_type=None, non_blocking=False):
        import numpy as np

        kv = _host_int32(kv_indptr, "kv_indptr")
        self._plan(qo_indptr, kv, None, None, 0, num_qo_heads, num_kv_heads, head_dim, custom_mask,
                   packed_custom_mask, causal, pos_encoding_mode, allow_fp16_qk_reduction, sm_scale, window_left,
                   logits_soft_cap, rope_scale, rope_theta, q_data_type, kv_data_type, np.diff(kv))

    def run(self, q, k, v, return_lse=False):
        return self._run(q, k, v, return_lse)

    def run_return_lse(self, q, k, v):
        return self._run(q, k, v, True)


class BatchPrefillWithPagedKVCacheWrapper(_BatchPrefill):
    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 paged_kv_indptr_buf=None, paged_kv_indices_buf=None, paged_kv_last_page_len_buf=None,
                 custom_mask_buf=None, qk_indptr_buf=None, backend="auto"):
        super().__init__(True, float_workspace_buffer, kv_layout, use_cuda_graph, backend,
                         {"qo_indptr_buf": qo_indptr_buf, "kv_indptr_buf": paged_kv_indptr_buf,
                          "paged_kv_indices_buf": paged_kv_indices_buf,
                          "paged_kv_last_page_len_buf": paged_kv_last_page_len_buf,
                          "custom_mask_buf": custom_mask_buf, "qk_indptr_buf": qk_indptr_buf})

    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
             head_dim, page_size, custom_mask=None, packed_custom_mask=None, causal=False, pos_encoding_mode="NONE",
             allow_fp16_qk_reduction=False, sm_scale=None, window_left=-1, logits_soft_cap=None, rope_scale=None,
             rope_theta=None, q_data_type="float16", kv_data_type=None, non_blocking=False):
        import numpy as np

        indptr = _host_int32(paged_kv_indptr, "paged_kv_indptr")
        indices = _host_int32(paged_kv_indices, "paged_kv_indices")
        last = _host_int32(paged_kv_last_page_len, "paged_kv_last_page_len")
        pages = np.diff(indptr)
        kv_lens = np.where(pages > 0, (pages - 1) * page_size + last[:len(pages)], 0)
        self._plan(qo_indptr, indptr, indices, last, page_size, num_qo_heads, num_kv_heads, head_dim, custom_mask,
                   packed_custom_mask, causal, pos_encoding_mode, allow_fp16_qk_reduction, sm_scale, window_left,
                   logits_soft_cap, rope_scale, rope_theta, q_data_type, kv_data_type, kv_lens)

    def run(self, q, paged_kv_cache, k_scale=None, v_scale=None, return_lse=False):
        if isinstance(paged_kv_cache, (tuple, list)):
            k, v = paged_kv_cache
        else:
            if paged_kv_cache.dim() != 5:
                raise invalid_argument(f"paged_kv_cache: {paged_kv_cache.dim()} dimensions is not allowed; allowed: "
                                       "5 ([pages, 2, ...]) or a (k_cache, v_cache) pair")
            k, v = paged_kv_cache[:, 0], paged_kv_cache[:, 1]
        return self._run(q, k, v, return_lse, k_scale, v_scale)

    def run_return_lse(self, q, paged_kv_cache, k_scale=None, v_scale=None):
        return self.run(q, paged_kv_cache, k_scale, v_scale, return_lse=True)

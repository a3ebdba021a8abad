"""FlashInfer's BatchDecodeWithPagedKVCacheWrapper over the C API
(attnjit_batch_decode.h): paged decode of a batch of requests.

The wrapper is one attnjit_plan_t (a ``Plan``): plan() hands it the page
table each step, run() launches on torch's current stream.
"""

import ctypes

from . import _batch_args as A
from . import _ctypes_types as T
from . import _runtime
from ._streams import current_stream
from ._dlpack import Borrowed, require_torch
from ._library import check, lib
from ._plans import Plan
from .decode import _POS_ENCODINGS, _float
from .errors import AttnjitError, Status, invalid_argument


class BatchDecodeWithPagedKVCacheWrapper:
    """Decode attention over a paged KV cache, FlashInfer's plan/run form.

    float_workspace_buffer: a CUDA uint8 tensor (128 MiB is plenty); it holds
    the plan's workspace and, without CUDA graphs, the page table's device copy.
    use_cuda_graph: plans keep one grid and the page table goes into the
    three fixed int32 buffers (paged_kv_indptr_buffer [max_batch_size + 1],
    paged_kv_indices_buffer [max_num_pages], paged_kv_last_page_len_buffer
    [max_batch_size]), so a run() captured once replays correctly after a new
    plan(). The buffers are used in that mode only and refused otherwise.
    """

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, use_tensor_cores=False,
                 paged_kv_indptr_buffer=None, paged_kv_indices_buffer=None, paged_kv_last_page_len_buffer=None):
        torch = require_torch()
        options = T.BatchDecodeWrapperOptions()
        lib().attnjit_batch_decode_wrapper_options_init(ctypes.byref(options))
        options.kv_layout = A.kv_layout(kv_layout)
        options.use_cuda_graph = A.flag("use_cuda_graph", use_cuda_graph)
        options.use_tensor_cores = A.flag("use_tensor_cores", use_tensor_cores)
        pointer, nbytes, device = A.workspace(torch, "float_workspace_buffer", float_workspace_buffer)
        options.device = device
        buffers = {"paged_kv_indptr_buffer": paged_kv_indptr_buffer,
                   "paged_kv_indices_buffer": paged_kv_indices_buffer,
                   "paged_kv_last_page_len_buffer": paged_kv_last_page_len_buffer}
        for name, buf in buffers.items():
            if buf is None:
                continue
            if not use_cuda_graph:
                raise invalid_argument(f"{name}: is given but use_cuda_graph=False; allowed: None (the fixed "
                                       "buffers serve CUDA-graph mode only)")
            if A.cuda_tensor(torch, name, buf).dtype != torch.int32:
                raise invalid_argument(f"{name}: dtype {buf.dtype} is not allowed; allowed: torch.int32")
        if use_cuda_graph:
            for name, buf in buffers.items():
                if buf is None:
                    raise invalid_argument(f"{name}: is None but use_cuda_graph=True; allowed: a CUDA int32 tensor "
                                           "the captured graph reads")
        handle = ctypes.c_void_p()
        with Borrowed() as borrowed:
            check(lib().attnjit_batch_decode_wrapper_create(
                _runtime.handle(), pointer, nbytes, ctypes.byref(options),
                *(borrowed.optional(buf, name) for name, buf in buffers.items()), ctypes.byref(handle)))
        self._plan = Plan(handle)
        self._device = float_workspace_buffer.device
        # The library keeps raw pointers into these: they must live as long as the handle.
        self._keep_alive = (float_workspace_buffer, *buffers.values())
        self._kv_layout = kv_layout
        self._planned = None  # (batch, num_qo_heads, head_dim, q dtype, window_left) of the last plan()

    @property
    def plan_handle(self):
        """The attnjit ``Plan`` (describe(), workspace_bytes) behind this wrapper."""
        return self._plan

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
             kv_data_type=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """Plans for one batch: indptr [batch + 1], indices, last_page_len [batch] (int32 or int64, any
        device: they are read on the host, as FlashInfer does)."""
        torch = require_torch()
        for name, value in (("num_qo_heads", num_qo_heads), ("num_kv_heads", num_kv_heads),
                            ("head_dim", head_dim), ("page_size", page_size)):
            A.positive_int(name, value)
        if pos_encoding_mode not in _POS_ENCODINGS:
            raise invalid_argument(f"pos_encoding_mode={pos_encoding_mode!r} is not a positional encoding; "
                                   "allowed: NONE, ROPE_LLAMA, ALIBI")
        options = T.BatchDecodePlanOptions()
        lib().attnjit_batch_decode_plan_options_init(ctypes.byref(options))
        options.pos_encoding_mode = _POS_ENCODINGS[pos_encoding_mode]
        options.window_left = A.window(window_left)
        q_dtype = A.dtype_of(torch, "q_data_type", q_data_type)
        options.q_data_type = T.DLDataType(*A.dlpack_dtype(torch, "q_data_type", q_dtype), 1)
        if kv_data_type is not None:
            kv_dtype = A.dtype_of(torch, "kv_data_type", kv_data_type)
            options.kv_data_type = T.DLDataType(*A.dlpack_dtype(torch, "kv_data_type", kv_dtype), 1)
        options.logits_soft_cap = _float("logits_soft_cap", logits_soft_cap, zero_allowed=True)  # 0: no capping
        options.sm_scale = _float("sm_scale", sm_scale)
        options.rope_scale = _float("rope_scale", rope_scale)
        options.rope_theta = _float("rope_theta", rope_theta)
        host = [A.host_int32(torch, name, t) for name, t in
                (("indptr", indptr), ("indices", indices), ("last_page_len", last_page_len))]
        with Borrowed() as borrowed, current_stream(torch, self._device) as stream:
            check(lib().attnjit_batch_decode_wrapper_plan(
                self._plan.handle, borrowed.tensor(host[0], "indptr"), borrowed.tensor(host[1], "indices"),
                borrowed.tensor(host[2], "last_page_len"), num_qo_heads, num_kv_heads, head_dim, page_size,
                ctypes.byref(options), stream))
        self._planned = (host[0].numel() - 1, num_qo_heads, head_dim, q_dtype, window_left)

    def run(self, q, paged_kv_cache, k_scale=None, v_scale=None, return_lse=False, *, out=None, lse=None,
            q_scale=None, enable_pdl=None, window_left=None, sinks=None):
        """o [batch, num_qo_heads, head_dim] in q's dtype, or (o, lse) with lse float32 [batch, num_qo_heads]
        in base 2. paged_kv_cache: one 5-D tensor [pages, 2, ...] or a (k_cache, v_cache) tuple."""
        torch = require_torch()
        A.refuse_if_given(q_scale=q_scale, sinks=sinks)
        pdl = A.tri_state("enable_pdl", enable_pdl)  # None: on for sm_90 and newer, as FlashInfer's
        if self._planned is None:
            raise AttnjitError(Status.NOT_PLANNED, "run() before plan(): call plan(indptr, indices, "
                               "last_page_len, ...) first")
        batch, num_qo_heads, head_dim, _, planned_window = self._planned
        if window_left is not None and window_left != planned_window:
            raise A.unsupported(f"window_left={window_left!r} differs from plan()'s window_left={planned_window}; "
                                "attnjit fixes the window at plan(); allowed: None or the planned value")
        A.cuda_tensor(torch, "q", q)
        ks = A.scale(torch, "k_scale", k_scale, 0.0)  # 0: not provided
        vs = A.scale(torch, "v_scale", v_scale, 0.0)
        k_cache, v_cache = A.kv_cache_pair(torch, "paged_kv_cache", paged_kv_cache)
        return_lse = bool(A.flag("return_lse", return_lse))
        if out is None:
            out = torch.empty((batch, num_qo_heads, head_dim), dtype=q.dtype, device=q.device)
        if return_lse and lse is None:
            lse = torch.empty((batch, num_qo_heads), dtype=torch.float32, device=q.device)
        with Borrowed() as borrowed, current_stream(torch, q.device) as stream:
            check(lib().attnjit_batch_decode_wrapper_run_v2(
                self._plan.handle, borrowed.tensor(q, "q"), borrowed.tensor(k_cache, "k_cache"),
                borrowed.optional(v_cache, "v_cache"), borrowed.tensor(out, "out"),
                borrowed.optional(lse if return_lse else None, "lse"), ks, vs, pdl, stream))
        return (out, lse) if return_lse else out

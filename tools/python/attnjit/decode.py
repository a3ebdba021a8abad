"""single_decode_with_kv_cache with FlashInfer's signature, over the C API."""

import ctypes
import math

from . import _ctypes_types as T
from . import _runtime
from ._plans import Plan
from ._dlpack import Borrowed, require_torch
from ._library import check, lib
from .errors import invalid_argument

_KV_LAYOUTS = {"NHD": 0, "HND": 1}
_POS_ENCODINGS = {"NONE": 0, "ROPE_LLAMA": 1, "ALIBI": 2}


def _float(name, value, zero_allowed=False):
    """None → 0.0, which the C API reads as "not provided" (FlashInfer's default).

    So an explicit 0 cannot be told from None there; we refuse it rather than
    silently apply the default, except where 0 already means the default.
    """
    if value is None:
        return 0.0
    value = float(value)
    if not math.isfinite(value):
        raise invalid_argument(f"{name}={value} is not finite; allowed: a finite number or None")
    if value == 0.0 and not zero_allowed:
        raise invalid_argument(f"{name}=0.0 is not allowed; allowed: a non-zero number, or None for the default")
    return value


def _options(kv_layout, pos_encoding_mode, use_tensor_cores, q_scale, k_scale, v_scale, window_left,
             logits_soft_cap, sm_scale, rope_scale, rope_theta):
    if kv_layout not in _KV_LAYOUTS:
        raise invalid_argument(f"kv_layout={kv_layout!r} is not a KV layout; allowed: NHD, HND")
    if pos_encoding_mode not in _POS_ENCODINGS:
        raise invalid_argument(f"pos_encoding_mode={pos_encoding_mode!r} is not a positional encoding; "
                               "allowed: NONE, ROPE_LLAMA, ALIBI")
    if isinstance(window_left, bool) or not isinstance(window_left, int) or not -1 <= window_left < 2**31:
        raise invalid_argument(f"window_left={window_left!r} is not allowed; allowed: -1 (whole sequence) "
                               "or an int >= 0")
    o = T.DecodeOptions()
    lib().attnjit_decode_options_init(ctypes.byref(o))
    o.kv_layout = _KV_LAYOUTS[kv_layout]
    o.pos_encoding_mode = _POS_ENCODINGS[pos_encoding_mode]
    o.use_tensor_cores = 1 if use_tensor_cores else 0
    o.window_left = window_left
    o.q_scale = _float("q_scale", q_scale)
    o.k_scale = _float("k_scale", k_scale)
    o.v_scale = _float("v_scale", v_scale)
    o.logits_soft_cap = _float("logits_soft_cap", logits_soft_cap, zero_allowed=True)  # 0: no capping
    o.sm_scale = _float("sm_scale", sm_scale)
    o.rope_scale = _float("rope_scale", rope_scale)
    o.rope_theta = _float("rope_theta", rope_theta)
    return o


def single_decode_with_kv_cache(q, k, v, kv_layout="NHD", pos_encoding_mode="NONE", use_tensor_cores=False,
                                q_scale=None, k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None,
                                sm_scale=None, rope_scale=None, rope_theta=None, return_lse=False):
    """Decode attention of one query token per head against one request's KV cache.

    Same arguments and results as flashinfer.decode.single_decode_with_kv_cache:
    q [num_qo_heads, head_dim]; k, v [kv_len, num_kv_heads, head_dim] (NHD) or
    [num_kv_heads, kv_len, head_dim] (HND), on one CUDA device. Returns o
    [num_qo_heads, head_dim] in q's dtype, or (o, lse) with lse float32
    [num_qo_heads] in base 2 (log2 of the sum of 2^(s·log2 e)), as FlashInfer.
    Runs on torch's current stream of q's device. Raises AttnjitError
    (MissingDependencyError when torch is not installed).
    """
    torch = require_torch()

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise invalid_argument(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    options = _options(kv_layout, pos_encoding_mode, use_tensor_cores, q_scale, k_scale, v_scale, window_left,
                       logits_soft_cap, sm_scale, rope_scale, rope_theta)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[0], dtype=torch.float32, device=q.device) if return_lse else None
    # The library plans (memoized per problem) and leases a workspace of this
    # call's own, so calls on several threads or streams never share one.
    with Borrowed() as borrowed, torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        check(lib().attnjit_single_decode_with_kv_cache(
            _runtime.handle(), borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v"),
            borrowed.tensor(o, "o"), borrowed.optional(lse, "lse"), ctypes.byref(options), None, 0, stream))
    return (o, lse) if return_lse else o


class SingleDecodeWrapper:
    """plan/run form of single_decode_with_kv_cache, for CUDA graphs and loops.

    Shaped like FlashInfer's wrappers: it owns its workspace (a torch uint8
    buffer, the caller's ``workspace_buffer`` if given) and its plan. plan()
    compiles or loads the kernels and sizes the split; run() only launches, on
    torch's current stream, so it can be captured in a CUDA graph.
    """

    def __init__(self, workspace_buffer=None, kv_layout="NHD", use_tensor_cores=False):
        self._workspace = workspace_buffer
        self._kv_layout = kv_layout
        self._use_tensor_cores = use_tensor_cores
        self._plan = None
        self._return_lse = False

    def plan(self, q, k, v, pos_encoding_mode="NONE", q_scale=None, k_scale=None, v_scale=None, window_left=-1,
             logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None, return_lse=False):
        """Plans for tensors shaped like q, k, v (their data is not read)."""
        torch = require_torch()

        options = _options(self._kv_layout, pos_encoding_mode, self._use_tensor_cores, q_scale, k_scale, v_scale,
                           window_left, logits_soft_cap, sm_scale, rope_scale, rope_theta)
        handle = ctypes.c_void_p()
        with Borrowed() as borrowed:
            check(lib().attnjit_single_decode_plan(
                _runtime.handle(), borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v"),
                ctypes.byref(options), int(bool(return_lse)), ctypes.byref(handle)))
        self._plan = Plan(handle)
        self._return_lse = bool(return_lse)
        need = self._plan.workspace_bytes
        if need and (self._workspace is None or self._workspace.numel() * self._workspace.element_size() < need):
            self._workspace = torch.empty(need, dtype=torch.uint8, device=q.device)
        return self._plan

    def run(self, q, k, v, out=None, lse=None):
        """o (and lse when planned with return_lse) for inputs matching the plan."""
        torch = require_torch()

        if self._plan is None:
            from .errors import AttnjitError, Status

            raise AttnjitError(Status.NOT_PLANNED, "run() before plan(): call plan(q, k, v, ...) first")
        o = out if out is not None else torch.empty(q.shape, dtype=q.dtype, device=q.device)
        if self._return_lse and lse is None:
            lse = torch.empty(q.shape[0], dtype=torch.float32, device=q.device)
        ws = self._workspace
        with Borrowed() as borrowed, torch.cuda.device(q.device):
            stream = torch.cuda.current_stream(q.device).cuda_stream
            check(lib().attnjit_single_decode_run(
                self._plan.handle, borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v"),
                borrowed.tensor(o, "o"), borrowed.optional(lse if self._return_lse else None, "lse"),
                None if ws is None else ws.data_ptr(),
                0 if ws is None else ws.numel() * ws.element_size(), stream))
        return (o, lse) if self._return_lse else o

"""single_decode_with_kv_cache with FlashInfer 0.7.2's signature, and its plan/run form, over the C API."""

import ctypes

from . import _args as checks
from . import _ctypes_types as c_types
from . import _runtime
from ._dlpack import Borrowed, require_torch
from ._library import check, lib
from ._plan_owner import PlanOwner
from ._plans import Plan
from ._streams import current_stream
from ._variant import variant_handle


def _options(kv_layout, pos_encoding_mode, use_tensor_cores, q_scale, k_scale, v_scale, window_left,
             logits_soft_cap, sm_scale, rope_scale, rope_theta, variant=None):
    options = c_types.DecodeOptions()
    lib().attnjit_decode_options_init_sized(ctypes.byref(options), ctypes.sizeof(options))
    options.kv_layout = checks.kv_layout(kv_layout)
    options.pos_encoding_mode = checks.pos_encoding(pos_encoding_mode)
    options.use_tensor_cores = checks.flag("use_tensor_cores", use_tensor_cores)
    options.window_left = checks.window(window_left)
    options.q_scale = checks.c_float("q_scale", q_scale)
    options.k_scale = checks.c_float("k_scale", k_scale)
    options.v_scale = checks.c_float("v_scale", v_scale)
    checks.set_score_options(options, logits_soft_cap, sm_scale, rope_scale, rope_theta)
    options.variant = variant_handle(variant)
    return options


def single_decode_with_kv_cache(q, k, v, kv_layout="NHD", pos_encoding_mode="NONE", use_tensor_cores=False,
                                q_scale=None, k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None,
                                sm_scale=None, rope_scale=None, rope_theta=None, return_lse=False, *, variant=None):
    """Decode attention of one query token per head against one request's KV cache.

    Same arguments and results as flashinfer.decode.single_decode_with_kv_cache:
    q [num_qo_heads, head_dim]; k, v [kv_len, num_kv_heads, head_dim] (NHD) or
    [num_kv_heads, kv_len, head_dim] (HND), on one CUDA device. Returns o
    [num_qo_heads, head_dim] in q's dtype, or (o, lse) with lse float32
    [num_qo_heads] in base 2, as FlashInfer. Runs on torch's current stream of
    q's device. Inside CUDA-graph capture (after a call of the same problem
    outside it, which compiles the kernels) its scratch comes from torch's
    stream-ordered allocator, which capture serves from the graph's pool, as
    FlashInfer's does. Raises AttnjitError (MissingDependencyError when torch
    is not installed).

    variant (an attnjit extension, keyword-only): an attnjit.Variant compiled
    into the kernel (b = 0, q = 0: the one query).
    """
    torch = require_torch()
    for name, value in (("q", q), ("k", k), ("v", v)):
        checks.tensor(torch, name, value)
    options = _options(kv_layout, pos_encoding_mode, use_tensor_cores, q_scale, k_scale, v_scale, window_left,
                       logits_soft_cap, sm_scale, rope_scale, rope_theta, variant)
    return_lse = bool(checks.flag("return_lse", return_lse))
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[:1], dtype=torch.float32, device=q.device) if return_lse else None
    with Borrowed() as borrowed, current_stream(torch, q.device) as stream:
        tq, tk, tv = borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v")
        to, tlse = borrowed.tensor(o, "o"), borrowed.optional(lse, "lse")
        if q.is_cuda and PlanOwner._capturing(torch, q.device):
            _run_with_stream_ordered_scratch(torch, q.device, tq, tk, tv, to, tlse, options, return_lse, stream)
        else:
            # Outside capture the library leases a workspace of this call's own, so calls on several
            # threads or streams never share one.
            check(lib().attnjit_single_decode_with_kv_cache(_runtime.handle(), tq, tk, tv, to, tlse,
                                                            ctypes.byref(options), None, 0, stream))
    return (o, lse) if return_lse else o


def _run_with_stream_ordered_scratch(torch, device, tq, tk, tv, to, tlse, options, return_lse, stream):
    """One call inside CUDA-graph capture: the library's pooled workspace cannot be leased there (the graph
    would outlive the lease), so the plan's workspace is a torch allocation made on the capturing stream."""
    handle = ctypes.c_void_p()
    check(lib().attnjit_single_decode_plan(_runtime.handle(), tq, tk, tv, ctypes.byref(options), int(return_lse),
                                           ctypes.byref(handle)))
    plan = Plan(handle)
    try:
        need = plan.workspace_bytes
        scratch = torch.empty(need, dtype=torch.uint8, device=device) if need else None
        check(lib().attnjit_single_decode_run(plan.handle, tq, tk, tv, to, tlse,
                                              None if scratch is None else ctypes.c_void_p(scratch.data_ptr()), need,
                                              stream))
    finally:
        plan.destroy()


class SingleDecodeWrapper(PlanOwner):
    """plan/run form of single_decode_with_kv_cache, for CUDA graphs and loops (an attnjit extension).

    Shaped like FlashInfer's wrappers: it owns its plan and its workspace (a
    torch uint8 buffer: the caller's ``workspace_buffer`` if given and large
    enough). plan() compiles or loads the kernels and sizes the split; run()
    only launches, on torch's current stream, so it can be captured in a CUDA
    graph.
    """

    def __init__(self, workspace_buffer=None, kv_layout="NHD", use_tensor_cores=False):
        checks.kv_layout(kv_layout)
        self._workspace = workspace_buffer
        self._kv_layout = kv_layout
        self._use_tensor_cores = bool(checks.flag("use_tensor_cores", use_tensor_cores))
        self._return_lse = False

    def plan(self, q, k, v, pos_encoding_mode="NONE", q_scale=None, k_scale=None, v_scale=None, window_left=-1,
             logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None, return_lse=False):
        """Plans for tensors shaped like q, k, v (their data is not read)."""
        torch = require_torch()
        options = _options(self._kv_layout, pos_encoding_mode, self._use_tensor_cores, q_scale, k_scale, v_scale,
                           window_left, logits_soft_cap, sm_scale, rope_scale, rope_theta)
        return_lse = bool(checks.flag("return_lse", return_lse))
        handle = ctypes.c_void_p()
        with Borrowed() as borrowed:
            check(lib().attnjit_single_decode_plan(
                _runtime.handle(), borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v"),
                ctypes.byref(options), int(return_lse), ctypes.byref(handle)))
        self._replace_plan(Plan(handle))
        self._return_lse = return_lse
        self.device = q.device
        need = self._plan.workspace_bytes
        if need and (self._workspace is None or self._workspace.numel() * self._workspace.element_size() < need):
            self._workspace = torch.empty(need, dtype=torch.uint8, device=q.device)
        self._planned = True
        return self._plan

    def run(self, q, k, v, out=None, lse=None):
        """o (and lse when planned with return_lse) for inputs matching the plan; out / lse are written in place
        when given."""
        torch = require_torch()
        self._require_planned("plan(q, k, v, ...)")
        checks.tensor(torch, "q", q)
        o = checks.output(torch, "out", out, q.shape, q.dtype, q.device)
        if self._return_lse:
            lse = checks.output(torch, "lse", lse, q.shape[:1], torch.float32, q.device)
        elif lse is not None:
            raise checks.unsupported(f"lse={checks.short(lse)} is not supported: plan() was made with "
                                     "return_lse=False; allowed: None")
        ws = self._workspace
        with Borrowed() as borrowed, self._stream(torch, q.device) as stream:
            check(lib().attnjit_single_decode_run(
                self._plan.handle, borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v"),
                borrowed.tensor(o, "out"), borrowed.optional(lse, "lse"),
                None if ws is None else ctypes.c_void_p(ws.data_ptr()),
                0 if ws is None else ws.numel() * ws.element_size(), stream))
        return (o, lse) if self._return_lse else o

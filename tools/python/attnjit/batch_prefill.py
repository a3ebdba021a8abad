"""BatchPrefillWithRaggedKVCacheWrapper and BatchPrefillWithPagedKVCacheWrapper with FlashInfer 0.7.2's
names and arguments, over the C API.

plan() reads the index arrays on the host (as FlashInfer's plan does), plans
and uploads them on torch's current stream; run() only launches, so it can be
captured in a CUDA graph after plan(). ``float_workspace_buffer`` is uint8
on the device. With ``use_cuda_graph=True`` the index arrays go into the
caller's ``*_buf`` tensors instead and the launch is fixed, so a graph
captured once replays whatever the latest plan() planned (batch size up to
the buffers' size). The options attnjit fixes at plan time (causal,
positional encoding, window, soft cap, RoPE) are planned again when
forward() changes them; a different sm_scale at run time is folded into the
run's logit scale.
"""

import ctypes
import functools
import math
import types

from . import _args as checks
from . import _ctypes_types as c_types
from . import _runtime
from ._dlpack import Borrowed, require_torch
from ._library import check, has, lib
from ._plan_owner import PlanOwner
from ._plans import BatchPrefillHandle, Plan
from ._variant import variant_handle
from .errors import invalid_argument
from .prefill import prefill_options

# The CUDA-graph buffers in attnjit_batch_prefill_create_v2's order, by FlashInfer 0.7.2's names (the C API
# calls the last one qk_indptr_buf; the ragged wrapper's kv indptr buffer is kv_indptr_buf).
_GRAPH_BUFFERS = ("qo_indptr_buf", "paged_kv_indptr_buf", "paged_kv_indices_buf", "paged_kv_last_page_len_buf",
                  "custom_mask_buf", "mask_indptr_buf")


def _int32_pointer(host):
    return ctypes.cast(host.data_ptr(), ctypes.POINTER(ctypes.c_int32)) if host is not None and host.numel() else None


def _lengths(indptr):
    return indptr[1:] - indptr[:-1]


def _check_length_hints(torch, qo_lens, kv_lens, seq_lens, seq_lens_q, max_token_per_sequence, max_sequence_kv,
                        uniform_q_len):
    """FlashInfer's optional length arguments (its cudnn backend's inputs, its fa2 backend's hints): attnjit
    plans from the index arrays, so each given one must agree with them."""
    for name, given, derived in (("seq_lens", seq_lens, kv_lens), ("seq_lens_q", seq_lens_q, qo_lens)):
        if given is None:
            continue
        checks.index_array(torch, name, given, ndim=None, allow_uint32=True)
        values = given.detach().reshape(-1).to("cpu").to(torch.int64)
        if values.numel() != derived.numel() or not torch.equal(values, derived.to(torch.int64)):
            raise invalid_argument(f"{name}={values.tolist()[:8]}... is not allowed; allowed: the lengths the index "
                                   f"arrays give, {derived.tolist()[:8]}...")
    for name, bound, lens in (("max_token_per_sequence", max_token_per_sequence, qo_lens),
                              ("max_sequence_kv", max_sequence_kv, kv_lens)):
        if bound is not None and lens.numel() and checks.positive_int(name, bound, 0) < int(lens.max()):
            raise invalid_argument(f"{name}={bound} is not allowed; allowed: >= {int(lens.max())}, the longest "
                                   "length the index arrays give")
    if uniform_q_len is not None:
        checks.positive_int("uniform_q_len", uniform_q_len)  # a tile-size hint; attnjit's planner sizes tiles itself


def metadata_in_float_workspace():
    """Whether the library uploads a plan's index arrays into the float workspace (as it did before plans owned
    their memory, attnjit.h's contract): then two prefill wrappers planned on one float workspace before either
    runs would overwrite each other's (cascade.py splits the buffer then)."""
    return not has("attnjit_plan_int_workspace_bytes")


class _BatchPrefill(PlanOwner):
    """What both wrappers share: the C handle, the graph buffers, plan() and run() around the C calls."""

    def _init(self, paged, float_workspace_buffer, kv_layout, use_cuda_graph, backend, jit_args, jit_kwargs,
              variant_owns_mask, graph_buffers):
        torch = require_torch()
        checks.refuse_if_given(jit_args=jit_args, jit_kwargs=jit_kwargs)
        checks.refuse_unless("variant_owns_mask", variant_owns_mask, (False,), "it needs a custom JIT variant "
                             "(jit_args)")
        checks.prefill_backend(backend)
        checks.kv_layout(kv_layout)
        self._paged = paged
        self._kv_layout, self._backend = kv_layout, backend
        self._use_cuda_graph = bool(checks.flag("use_cuda_graph", use_cuda_graph))
        for name, buf in graph_buffers.items():
            if buf is not None and not self._use_cuda_graph:
                raise invalid_argument(f"{self._buffer_name(name)}: is given but use_cuda_graph=False; allowed: None "
                                       "(the fixed buffers serve CUDA-graph mode only)")
        self._own_workspaces(torch, float_workspace_buffer)
        self._graph_buffers = graph_buffers
        qo_buf = graph_buffers["qo_indptr_buf"]
        self._fixed_batch_size = len(qo_buf) - 1 if self._use_cuda_graph and qo_buf is not None else 0
        # FlashInfer's attribute names, which serving engines read.
        self._qo_indptr_buf = qo_buf
        self._custom_mask_buf = graph_buffers["custom_mask_buf"]
        self._mask_indptr_buf = graph_buffers["mask_indptr_buf"]
        self._remake_plan()

    def _buffer_name(self, name):
        return name if self._paged or name != "paged_kv_indptr_buf" else "kv_indptr_buf"

    def _remake_plan(self):
        # attnjit_batch_prefill.h's wrapper (an attnjit_plan_t) where the library has it, else the 0.2 handle.
        self._generic = has("attnjit_batch_prefill_wrapper_create")
        ws = self._float_workspace_buffer
        handle = ctypes.c_void_p()
        with Borrowed() as borrowed:
            buffers = [borrowed.optional(self._graph_buffers[name], self._buffer_name(name)) for name in _GRAPH_BUFFERS]
            if self._generic:
                options = c_types.BatchPrefillWrapperOptions()
                lib().attnjit_batch_prefill_wrapper_options_init(ctypes.byref(options))
                options.paged, options.kv_layout = int(self._paged), checks.kv_layout(self._kv_layout)
                options.backend = checks.prefill_backend(self._backend)
                options.use_cuda_graph, options.device = int(self._use_cuda_graph), ws.device.index or 0
                check(lib().attnjit_batch_prefill_wrapper_create(
                    _runtime.handle(), ctypes.c_void_p(ws.data_ptr()), self._workspace_size, ctypes.byref(options),
                    *buffers, ctypes.byref(handle)))
            else:
                check(lib().attnjit_batch_prefill_create_v2(
                    _runtime.handle(), int(self._paged), ctypes.c_void_p(ws.data_ptr()), self._workspace_size,
                    checks.kv_layout(self._kv_layout), self._backend.encode(), ws.device.index or 0,
                    int(self._use_cuda_graph), *buffers, ctypes.byref(handle)))
        if self._generic:
            plan = Plan(handle)
            self._adopt_int_workspace(plan.handle)
        else:
            plan = BatchPrefillHandle(handle)
        self._replace_plan(plan)

    @property
    def is_cuda_graph_enabled(self):
        return self._use_cuda_graph

    def _checked_batch(self, torch, host, page_size, num_qo_heads, num_kv_heads, head_dim, custom_mask,
                       packed_custom_mask, causal, pos_encoding_mode, use_fp16_qk_reduction, sm_scale, window_left,
                       logits_soft_cap, rope_scale, rope_theta, q_data_type, kv_data_type, o_data_type, non_blocking,
                       kv_lens):
        """Checks what both plan()s share and returns the plan's arguments (the wrapper is not touched:
        workspace_size() checks its arguments here too)."""
        for name, value in (("num_qo_heads", num_qo_heads), ("num_kv_heads", num_kv_heads)):
            checks.positive_int(name, value)
        checks.use_fp16_qk_reduction(use_fp16_qk_reduction)
        checks.flag("non_blocking", non_blocking)  # the copies are ordered on the stream either way
        # float8_e4m3fn q writes float16 / bfloat16 (o_data_type; the C side refuses the rest by name).
        q_dtype, kv_dtype, o_dtype = checks.plan_dtypes(torch, q_data_type, kv_data_type, o_data_type,
                                                        fp8_q_output=True)
        if host["qo_indptr"].numel() < 1:
            raise invalid_argument("qo_indptr: 0 entries is not allowed; allowed: batch_size + 1 >= 1 entries")
        batch = host["qo_indptr"].numel() - 1
        if host["kv_indptr"].numel() != batch + 1:
            raise invalid_argument(f"{'paged_kv_indptr' if self._paged else 'kv_indptr'}: "
                                   f"{host['kv_indptr'].numel()} entries is not allowed; allowed: len(qo_indptr) = "
                                   f"{batch + 1}")
        host["mask"] = self._host_mask(torch, custom_mask, packed_custom_mask, host["qo_indptr"], kv_lens)
        return types.SimpleNamespace(
            host=host, page_size=page_size, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
            batch=batch, q_dtype=q_dtype, kv_dtype=kv_dtype, o_dtype=o_dtype, causal=bool(checks.flag("causal", causal)),
            pos_encoding_mode=pos_encoding_mode, window_left=window_left, soft_cap=checks.soft_cap(logits_soft_cap),
            sm_scale=sm_scale, rope_scale=rope_scale, rope_theta=rope_theta)

    def _plan_batch(self, plan_args):
        """Keeps the checked plan arguments as the plan state (FlashInfer's attribute names) and plans."""
        self._host_plan = plan_args.host
        self._page_size, self._num_qo_heads = plan_args.page_size, plan_args.num_qo_heads
        self._num_kv_heads, self._head_dim = plan_args.num_kv_heads, plan_args.head_dim
        self._batch_size = plan_args.batch
        self._qo_indptr_last = int(plan_args.host["qo_indptr"][-1])
        self._cached_q_data_type, self._cached_kv_data_type = plan_args.q_dtype, plan_args.kv_dtype
        self._cached_o_data_type = plan_args.o_dtype
        # FlashInfer's plan state, which run() reads and forward() overwrites.
        self._causal, self._pos_encoding_mode = plan_args.causal, plan_args.pos_encoding_mode
        self._use_fp16_qk_reduction = False
        self._window_left, self._logits_soft_cap = plan_args.window_left, plan_args.soft_cap
        self._sm_scale, self._rope_scale = plan_args.sm_scale, plan_args.rope_scale
        self._rope_theta = plan_args.rope_theta
        self._plan_index_arrays()

    def _sizes_for(self, torch, plan_args):
        """(float, int) bytes a plan() of the checked arguments needs (attnjit_batch_prefill_wrapper_workspace_bytes)."""
        if not (self._generic and has("attnjit_batch_prefill_wrapper_workspace_bytes")):
            raise checks.unsupported("workspace_size() needs a libattnjit with "
                                     "attnjit_batch_prefill_wrapper_workspace_bytes")
        options = prefill_options(plan_args.causal, self._kv_layout, plan_args.pos_encoding_mode,
                                  plan_args.window_left, plan_args.soft_cap, plan_args.sm_scale, plan_args.rope_scale,
                                  plan_args.rope_theta, self._backend,
                                  o_dtype=checks.o_dtype_code(torch, "o_data_type", plan_args.o_dtype,
                                                              plan_args.q_dtype))
        float_bytes, int_bytes = ctypes.c_size_t(), ctypes.c_size_t()
        with Borrowed() as borrowed, self._stream(torch):
            check(lib().attnjit_batch_prefill_wrapper_workspace_bytes(
                self._plan.handle, *self._c_plan_args(torch, borrowed, plan_args), ctypes.byref(options),
                *self._c_plan_dtypes(torch, plan_args), self._c_mask(torch, borrowed, plan_args),
                ctypes.byref(float_bytes), ctypes.byref(int_bytes)))
        return float_bytes.value, int_bytes.value

    @staticmethod
    def _host_mask(torch, custom_mask, packed_custom_mask, qo_indptr, kv_lens):
        """FlashInfer's mask as host bytes (0 / 1) of the flattened per-request [qo_len, kv_len] blocks."""
        import numpy as np

        if packed_custom_mask is not None:
            checks.tensor(torch, "packed_custom_mask", packed_custom_mask)
            if packed_custom_mask.dtype != torch.uint8:
                raise invalid_argument(f"packed_custom_mask: dtype {packed_custom_mask.dtype} is not allowed; "
                                       "allowed: torch.uint8 (bit-packed, little-endian within a byte)")
            # FlashInfer's segment packing: each request's block from a byte boundary.
            packed = packed_custom_mask.detach().to("cpu").numpy()
            parts, at = [], 0
            for b in range(qo_indptr.numel() - 1):
                n = int(qo_indptr[b + 1] - qo_indptr[b]) * int(kv_lens[b])
                nbytes = (n + 7) // 8
                if at + nbytes > packed.size:
                    raise invalid_argument(f"packed_custom_mask: {packed.size} bytes is not allowed; allowed: the "
                                           "segment-packed mask of every request's [qo_len, kv_len] block")
                parts.append(np.unpackbits(packed[at:at + nbytes], bitorder="little")[:n])
                at += nbytes
            return np.ascontiguousarray(np.concatenate(parts) if parts else np.zeros(0, np.uint8), dtype=np.uint8)
        if custom_mask is not None:
            checks.tensor(torch, "custom_mask", custom_mask)
            return np.ascontiguousarray(custom_mask.detach().reshape(-1).to("cpu", torch.bool).numpy(),
                                        dtype=np.uint8)
        return None

    def _settings(self):
        """The options fixed at plan time, as run() would use them now (None folded to FlashInfer's defaults;
        causal does not matter under a custom mask)."""
        causal = self._causal if self._host_plan["mask"] is None else None
        return (causal, self._pos_encoding_mode, self._window_left, checks.soft_cap(self._logits_soft_cap),
                1.0 if self._rope_scale is None else float(self._rope_scale),
                1e4 if self._rope_theta is None else float(self._rope_theta))

    def _plan_index_arrays(self):
        """Plans the C handle for the kept index arrays and the current plan state."""
        torch = require_torch()
        checks.use_fp16_qk_reduction(self._use_fp16_qk_reduction)
        options = prefill_options(self._causal, self._kv_layout, self._pos_encoding_mode, self._window_left,
                                  self._logits_soft_cap, self._sm_scale, self._rope_scale, self._rope_theta,
                                  self._backend, getattr(self, "_variant", None),
                                  checks.o_dtype_code(torch, "o_data_type", self._cached_o_data_type,
                                                      self._cached_q_data_type))
        self._planned = False
        if self._generic:
            self._plan_with_room(torch, lambda: self._plan_wrapper(torch, options))
        else:
            self._plan_handle(torch, options)
        self._planned = True
        self._planned_settings = self._settings()
        self._planned_sm_scale = self._default_sm_scale() if self._sm_scale is None else float(self._sm_scale)

    def _plan_wrapper(self, torch, options):
        """attnjit_batch_prefill_wrapper_plan: the host arrays as DLTensors."""
        plan_args = types.SimpleNamespace(host=self._host_plan, page_size=self._page_size,
                                          num_qo_heads=self._num_qo_heads, num_kv_heads=self._num_kv_heads,
                                          head_dim=self._head_dim, q_dtype=self._cached_q_data_type,
                                          kv_dtype=self._cached_kv_data_type)
        with Borrowed() as borrowed, self._stream(torch) as stream:
            check(lib().attnjit_batch_prefill_wrapper_plan(
                self._plan.handle, *self._c_plan_args(torch, borrowed, plan_args), ctypes.byref(options),
                *self._c_plan_dtypes(torch, plan_args), self._c_mask(torch, borrowed, plan_args), stream))

    def _c_plan_args(self, torch, borrowed, plan_args):
        """The index arrays, page size, heads and head_dim of attnjit_batch_prefill_wrapper_plan (and _workspace_bytes)."""
        host = plan_args.host
        return (borrowed.tensor(host["qo_indptr"], "qo_indptr"),
                borrowed.tensor(host["kv_indptr"], "paged_kv_indptr" if self._paged else "kv_indptr"),
                borrowed.optional(host.get("indices"), "paged_kv_indices"),
                borrowed.optional(host.get("last_page_len"), "paged_kv_last_page_len"), plan_args.page_size,
                plan_args.num_qo_heads, plan_args.num_kv_heads, plan_args.head_dim)

    @staticmethod
    def _c_plan_dtypes(torch, plan_args):
        return (c_types.DLDataType(*checks.dlpack_dtype(torch, "q_data_type", plan_args.q_dtype), 1),
                c_types.DLDataType(*checks.dlpack_dtype(torch, "kv_data_type", plan_args.kv_dtype), 1))

    @staticmethod
    def _c_mask(torch, borrowed, plan_args):
        mask = plan_args.host["mask"]
        return borrowed.optional(None if mask is None else torch.from_numpy(mask), "custom_mask")

    def _plan_handle(self, torch, options):
        """attnjit_batch_prefill_plan (the 0.2 handle): the host arrays as pointers."""
        host, mask = self._host_plan, self._host_plan["mask"]
        with self._stream(torch) as stream:
            check(lib().attnjit_batch_prefill_plan(
                self._plan.handle, _int32_pointer(host["qo_indptr"]), _int32_pointer(host["kv_indptr"]),
                self._batch_size, _int32_pointer(host.get("indices")),
                0 if host.get("indices") is None else host["indices"].numel(), _int32_pointer(host.get("last_page_len")),
                self._page_size, self._num_qo_heads, self._num_kv_heads, self._head_dim, ctypes.byref(options),
                checks.dtype_name(torch, "q_data_type", self._cached_q_data_type).encode(),
                checks.dtype_name(torch, "kv_data_type", self._cached_kv_data_type).encode(),
                None if mask is None else mask.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)),
                0 if mask is None else mask.size, stream))

    def _default_sm_scale(self):
        return 1.0 / math.sqrt(self._head_dim)

    def _run(self, torch, q, k, v, args, q_scale, k_scale, v_scale, out, lse, return_lse, lse_base, lse_layout,
             enable_pdl, window_left, kv_cache_sf, out_zeroed):
        checks.no_extra_args(args)
        checks.refuse_if_given(kv_cache_sf=kv_cache_sf)
        checks.refuse_unless("enable_pdl", checks.tri_state("enable_pdl", enable_pdl), (-1, 0),
                             "batch prefill launches without programmatic dependent launch (its output is the same)")
        self._require_planned()
        self._check_run_against_plan(torch, window_left, q)
        # In CUDA-graph mode q may have more rows than this plan uses (a graph captured once serves smaller plans).
        if q.shape[0] != self._qo_indptr_last and not (self._use_cuda_graph and q.shape[0] > self._qo_indptr_last):
            raise invalid_argument(f"q: {q.shape[0]} rows is not allowed; allowed: qo_indptr[-1] = "
                                   f"{self._qo_indptr_last}, the planned number of query tokens"
                                   + (" or more (CUDA-graph mode)" if self._use_cuda_graph else ""))
        checks.cuda_tensor(torch, "q", q)
        q_scale, k_scale, v_scale = (checks.scale(torch, name, value) for name, value in
                                     (("q_scale", q_scale), ("k_scale", k_scale), ("v_scale", v_scale)))
        self._plan_again_if_options_changed(torch, q.device, "causal, pos_encoding_mode, window_left, logits_soft_cap, rope_scale and rope_theta", self._plan_index_arrays)
        logit_scale = self._logit_scale(q_scale, k_scale)
        shape = tuple(q.shape)
        if out is None and out_zeroed:
            out = torch.zeros(shape, dtype=self._cached_o_data_type, device=q.device)  # as FlashInfer's paged run
        out = checks.output(torch, "out", out, shape, self._cached_o_data_type, q.device)
        lse = checks.Lse(torch, lse, return_lse, q.shape[0], q.shape[1], q.device, lse_base, lse_layout)
        with Borrowed() as borrowed, self._stream(torch, q.device) as stream:
            run = lib().attnjit_batch_prefill_wrapper_run if self._generic else lib().attnjit_batch_prefill_run_v2
            check(run(
                self._plan.handle, borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v"),
                borrowed.tensor(out, "out"), borrowed.optional(lse.kernel, "lse"),
                0.0 if logit_scale is None else logit_scale, 0.0 if v_scale is None else v_scale, stream))
        return lse.finish(torch, out)

    def _forward_state(self, causal, pos_encoding_mode, use_fp16_qk_reduction, window_left, logits_soft_cap,
                       sm_scale, rope_scale, rope_theta):
        """forward()'s options replace plan()'s, as in FlashInfer (run() plans again where they differ)."""
        checks.use_fp16_qk_reduction(use_fp16_qk_reduction)
        self._causal, self._pos_encoding_mode, self._use_fp16_qk_reduction = causal, pos_encoding_mode, False
        self._window_left, self._logits_soft_cap, self._sm_scale = window_left, logits_soft_cap, sm_scale
        self._rope_scale, self._rope_theta = rope_scale, rope_theta


class BatchPrefillWithRaggedKVCacheWrapper(_BatchPrefill):
    """Batch prefill / append attention over ragged K and V tensors, FlashInfer's plan/run form."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 kv_indptr_buf=None, custom_mask_buf=None, mask_indptr_buf=None, backend="auto", jit_args=None,
                 jit_kwargs=None, variant_owns_mask=False):
        self._kv_indptr_buf = kv_indptr_buf
        self._init(False, float_workspace_buffer, kv_layout, use_cuda_graph, backend, jit_args, jit_kwargs,
                   variant_owns_mask,
                   {"qo_indptr_buf": qo_indptr_buf, "paged_kv_indptr_buf": kv_indptr_buf,
                    "paged_kv_indices_buf": None, "paged_kv_last_page_len_buf": None,
                    "custom_mask_buf": custom_mask_buf, "mask_indptr_buf": mask_indptr_buf})

    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo=None, custom_mask=None,
             packed_custom_mask=None, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
             window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None,
             q_data_type="float16", kv_data_type=None, o_data_type=None, non_blocking=True, prefix_len_ptr=None,
             token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None, fixed_split_size=None,
             disable_split_kv=False, seq_lens=None, seq_lens_q=None, max_token_per_sequence=None,
             max_sequence_kv=None, v_indptr=None, o_indptr=None, uniform_q_len=None, *, variant=None):
        """Plans one batch: qo_indptr and kv_indptr [batch + 1], int32, on any device (read on the host).
        variant (an attnjit extension, keyword-only): an attnjit.Variant for this plan's kernels (b: the
        request), its values read at each run()."""
        torch = require_torch()
        variant_handle(variant)  # checked before anything changes
        head_dim = checks.head_dims(head_dim_qk, head_dim_vo)
        checks.refuse_if_given(prefix_len_ptr=prefix_len_ptr, token_pos_in_items_ptr=token_pos_in_items_ptr,
                               max_item_len_ptr=max_item_len_ptr)
        checks.refuse_unless("token_pos_in_items_len", token_pos_in_items_len, (0,), "multi-item scoring is "
                             "FlashInfer's alone")
        checks.split_controls(fixed_split_size, disable_split_kv)
        host = {"qo_indptr": checks.host_int32(torch, "qo_indptr", qo_indptr),
                "kv_indptr": checks.host_int32(torch, "kv_indptr", kv_indptr)}
        for name, given, planned in (("v_indptr", v_indptr, "kv_indptr"), ("o_indptr", o_indptr, "qo_indptr")):
            if given is not None and not torch.equal(checks.host_int32(torch, name, given), host[planned]):
                raise checks.unsupported(f"{name} other than {planned} is not supported: attnjit's ragged K/V and "
                                         f"output rows follow {planned}; allowed: None or {planned}'s values")
        kv_lens = _lengths(host["kv_indptr"])
        _check_length_hints(torch, _lengths(host["qo_indptr"]), kv_lens, seq_lens, seq_lens_q,
                            max_token_per_sequence, max_sequence_kv, uniform_q_len)
        plan_args = self._checked_batch(
            torch, host, 0, num_qo_heads, num_kv_heads, head_dim, custom_mask, packed_custom_mask, causal,
            pos_encoding_mode, use_fp16_qk_reduction, sm_scale, window_left, logits_soft_cap, rope_scale, rope_theta,
            q_data_type, kv_data_type, o_data_type, non_blocking, kv_lens)
        self._variant = variant
        self._plan_batch(plan_args)

    begin_forward = plan

    def forward(self, q, k, v, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False, window_left=-1,
                logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """FlashInfer's deprecated form of run(): its options replace plan()'s."""
        self._forward_state(causal, pos_encoding_mode, use_fp16_qk_reduction, window_left, logits_soft_cap, sm_scale,
                            rope_scale, rope_theta)
        return self.run(q, k, v)

    def forward_return_lse(self, q, k, v, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                           window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """forward() returning (o, lse)."""
        self._forward_state(causal, pos_encoding_mode, use_fp16_qk_reduction, window_left, logits_soft_cap, sm_scale,
                            rope_scale, rope_theta)
        return self.run(q, k, v, return_lse=True)

    def run(self, q, k, v, *args, q_scale=None, k_scale=None, v_scale=None, o_scale=None, out=None, lse=None,
            return_lse=False, lse_base="log2", lse_layout="NH", enable_pdl=None, kv_cache_sf=None):
        """o [qo_indptr[-1], num_qo_heads, head_dim], or (o, lse) with lse float32 [qo_indptr[-1], num_qo_heads]
        (base 2 and that layout unless lse_base / lse_layout ask otherwise). q_scale and k_scale multiply the
        softmax scale, v_scale the output; out / lse, when given, are checked and written in place."""
        torch = require_torch()
        checks.refuse_unless("o_scale", o_scale, (None, 1.0), "it scales an fp8 output, which attnjit does not write")
        for name, value in (("k", k), ("v", v)):
            checks.tensor(torch, name, value)
        return self._run(torch, q, k, v, args, q_scale, k_scale, v_scale, out, lse, return_lse, lse_base, lse_layout,
                         enable_pdl, None, kv_cache_sf, out_zeroed=False)

    run_return_lse = functools.partialmethod(run, return_lse=True)


class BatchPrefillWithPagedKVCacheWrapper(_BatchPrefill):
    """Batch prefill / append attention over a paged KV cache, FlashInfer's plan/run form."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 paged_kv_indptr_buf=None, paged_kv_indices_buf=None, paged_kv_last_page_len_buf=None,
                 custom_mask_buf=None, mask_indptr_buf=None, backend="auto", jit_args=None, jit_kwargs=None,
                 variant_owns_mask=False):
        self._paged_kv_indptr_buf = paged_kv_indptr_buf
        self._paged_kv_indices_buf = paged_kv_indices_buf
        self._paged_kv_last_page_len_buf = paged_kv_last_page_len_buf
        self._init(True, float_workspace_buffer, kv_layout, use_cuda_graph, backend, jit_args, jit_kwargs,
                   variant_owns_mask,
                   {"qo_indptr_buf": qo_indptr_buf, "paged_kv_indptr_buf": paged_kv_indptr_buf,
                    "paged_kv_indices_buf": paged_kv_indices_buf,
                    "paged_kv_last_page_len_buf": paged_kv_last_page_len_buf, "custom_mask_buf": custom_mask_buf,
                    "mask_indptr_buf": mask_indptr_buf})

    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
             head_dim_qk, page_size, head_dim_vo=None, custom_mask=None, packed_custom_mask=None, causal=False,
             pos_encoding_mode="NONE", use_fp16_qk_reduction=False, sm_scale=None, window_left=-1,
             logits_soft_cap=None, rope_scale=None, rope_theta=None, q_data_type="float16", kv_data_type=None,
             o_data_type=None, non_blocking=True, prefix_len_ptr=None, token_pos_in_items_ptr=None,
             token_pos_in_items_len=0, max_item_len_ptr=None, seq_lens=None, seq_lens_q=None, block_tables=None,
             max_token_per_sequence=None, max_sequence_kv=None, fixed_split_size=None, disable_split_kv=False,
             uniform_q_len=None, *, variant=None):
        """Plans one batch: qo_indptr and paged_kv_indptr [batch + 1], paged_kv_indices, paged_kv_last_page_len
        [batch], int32, on any device (read on the host). variant (an attnjit extension, keyword-only): an
        attnjit.Variant for this plan's kernels (b: the request), its values read at each run()."""
        variant_handle(variant)  # checked before anything changes
        plan_args = self._checked_paged(
            qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
            head_dim_qk, page_size, head_dim_vo, custom_mask, packed_custom_mask, causal, pos_encoding_mode,
            use_fp16_qk_reduction, sm_scale, window_left, logits_soft_cap, rope_scale, rope_theta, q_data_type,
            kv_data_type, o_data_type, non_blocking, prefix_len_ptr, token_pos_in_items_ptr, token_pos_in_items_len,
            max_item_len_ptr, seq_lens, seq_lens_q, block_tables, max_token_per_sequence, max_sequence_kv,
            fixed_split_size, disable_split_kv, uniform_q_len)
        self._variant = variant
        self._plan_batch(plan_args)

    def workspace_size(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
                       num_kv_heads, head_dim_qk, page_size, head_dim_vo=None, custom_mask=None,
                       packed_custom_mask=None, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                       sm_scale=None, window_left=-1, logits_soft_cap=None, rope_scale=None, rope_theta=None,
                       q_data_type="float16", kv_data_type=None, o_data_type=None, prefix_len_ptr=None,
                       token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None, seq_lens=None,
                       seq_lens_q=None, block_tables=None, max_token_per_sequence=None, max_sequence_kv=None,
                       fixed_split_size=None, disable_split_kv=False, uniform_q_len=None):
        """(float_workspace_size, int_workspace_size) in bytes that plan() with these arguments needs, as
        FlashInfer's: the scratch of float_workspace_buffer (plan() refuses a smaller one) and the plan memory it
        fills (what an int_workspace_buffer must hold). plan()'s checks and errors (in CUDA-graph mode against the
        runs so far); nothing is allocated and the current plan stays as it was."""
        plan_args = self._checked_paged(
            qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
            head_dim_qk, page_size, head_dim_vo, custom_mask, packed_custom_mask, causal, pos_encoding_mode,
            use_fp16_qk_reduction, sm_scale, window_left, logits_soft_cap, rope_scale, rope_theta, q_data_type,
            kv_data_type, o_data_type, True, prefix_len_ptr, token_pos_in_items_ptr, token_pos_in_items_len,
            max_item_len_ptr, seq_lens, seq_lens_q, block_tables, max_token_per_sequence, max_sequence_kv,
            fixed_split_size, disable_split_kv, uniform_q_len)
        return self._sizes_for(require_torch(), plan_args)

    def _checked_paged(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
                       num_kv_heads, head_dim_qk, page_size, head_dim_vo, custom_mask, packed_custom_mask, causal,
                       pos_encoding_mode, use_fp16_qk_reduction, sm_scale, window_left, logits_soft_cap, rope_scale,
                       rope_theta, q_data_type, kv_data_type, o_data_type, non_blocking, prefix_len_ptr,
                       token_pos_in_items_ptr, token_pos_in_items_len, max_item_len_ptr, seq_lens, seq_lens_q,
                       block_tables, max_token_per_sequence, max_sequence_kv, fixed_split_size, disable_split_kv,
                       uniform_q_len):
        """plan()'s arguments checked, the index arrays read on the host (plan() and workspace_size())."""
        torch = require_torch()
        head_dim = checks.head_dims(head_dim_qk, head_dim_vo)
        checks.positive_int("page_size", page_size)
        checks.refuse_if_given(prefix_len_ptr=prefix_len_ptr, token_pos_in_items_ptr=token_pos_in_items_ptr,
                               max_item_len_ptr=max_item_len_ptr, block_tables=block_tables)
        checks.refuse_unless("token_pos_in_items_len", token_pos_in_items_len, (0,), "multi-item scoring is "
                             "FlashInfer's alone")
        checks.split_controls(fixed_split_size, disable_split_kv)
        host = {"qo_indptr": checks.host_int32(torch, "qo_indptr", qo_indptr),
                "kv_indptr": checks.host_int32(torch, "paged_kv_indptr", paged_kv_indptr),
                "indices": checks.host_int32(torch, "paged_kv_indices", paged_kv_indices),
                "last_page_len": checks.host_int32(torch, "paged_kv_last_page_len", paged_kv_last_page_len)}
        pages = _lengths(host["kv_indptr"])
        if host["last_page_len"].numel() != pages.numel():
            raise invalid_argument(f"paged_kv_last_page_len: {host['last_page_len'].numel()} entries is not allowed; "
                                   f"allowed: batch_size = {pages.numel()}")
        kv_lens = (pages - 1).clamp(min=0) * page_size + host["last_page_len"]
        kv_lens = torch.where(pages > 0, kv_lens, torch.zeros_like(kv_lens))
        _check_length_hints(torch, _lengths(host["qo_indptr"]), kv_lens, seq_lens, seq_lens_q,
                            max_token_per_sequence, max_sequence_kv, uniform_q_len)
        return self._checked_batch(torch, host, page_size, num_qo_heads, num_kv_heads, head_dim, custom_mask,
                                   packed_custom_mask, causal, pos_encoding_mode, use_fp16_qk_reduction, sm_scale,
                                   window_left, logits_soft_cap, rope_scale, rope_theta, q_data_type, kv_data_type,
                                   o_data_type, non_blocking, kv_lens)

    begin_forward = plan

    def prewarm_paged_kv_stride_variant(self, variant="independent"):
        """FlashInfer loads a kernel variant for K and V of different strides here; attnjit's kernels read both
        strides at run time, so after plan() every run() is capturable as it is."""
        checks.refuse_unless("variant", variant, ("independent",), "the only paged-KV-stride variant FlashInfer has")
        self._require_planned()

    def forward(self, q, paged_kv_cache, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                rope_theta=None):
        """FlashInfer's deprecated form of run(): its options replace plan()'s."""
        self._forward_state(causal, pos_encoding_mode, use_fp16_qk_reduction, window_left, logits_soft_cap, sm_scale,
                            rope_scale, rope_theta)
        return self.run(q, paged_kv_cache, k_scale=k_scale, v_scale=v_scale)

    def forward_return_lse(self, q, paged_kv_cache, causal=False, pos_encoding_mode="NONE",
                           use_fp16_qk_reduction=False, k_scale=None, v_scale=None, window_left=-1,
                           logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """forward() returning (o, lse)."""
        self._forward_state(causal, pos_encoding_mode, use_fp16_qk_reduction, window_left, logits_soft_cap, sm_scale,
                            rope_scale, rope_theta)
        return self.run(q, paged_kv_cache, k_scale=k_scale, v_scale=v_scale, return_lse=True)

    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False, lse_base="log2", lse_layout="NH", enable_pdl=None, window_left=None, sinks=None,
            kv_cache_sf=None, skip_softmax_threshold_scale_factor=None, use_fp16_softmax=None, uses_spcompress=None):
        """o [qo_indptr[-1], num_qo_heads, head_dim], or (o, lse) with lse float32 [qo_indptr[-1], num_qo_heads]
        (base 2 and that layout unless lse_base / lse_layout ask otherwise). paged_kv_cache: one 5-D tensor
        [pages, 2, ...] or a (k_cache, v_cache) pair. q_scale and k_scale multiply the softmax scale, v_scale the
        output; out / lse, when given, are checked and written in place."""
        torch = require_torch()
        checks.refuse_if_given(sinks=sinks, skip_softmax_threshold_scale_factor=skip_softmax_threshold_scale_factor,
                               use_fp16_softmax=use_fp16_softmax, uses_spcompress=uses_spcompress)
        k, v = checks.kv_cache_pair(torch, "paged_kv_cache", paged_kv_cache, split=True, kv_layout=self._kv_layout)
        return self._run(torch, q, k, v, args, q_scale, k_scale, v_scale, out, lse, return_lse, lse_base, lse_layout,
                         enable_pdl, window_left, kv_cache_sf, out_zeroed=True)

    run_return_lse = functools.partialmethod(run, return_lse=True)

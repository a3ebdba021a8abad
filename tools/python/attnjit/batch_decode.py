"""FlashInfer 0.7.2's BatchDecodeWithPagedKVCacheWrapper over the C API
(attnjit_batch_decode.h): paged decode of a batch of requests.

The wrapper is one attnjit_plan_t: plan() hands it the page table each step
(read on the host, as FlashInfer's plan does), run() launches on torch's
current stream. Its arguments, their order and defaults are FlashInfer
0.7.2's (tests/test_flashinfer_signatures.py compares them with the wheel);
the options attnjit fixes at plan time (positional encoding, window, soft
cap, RoPE) are planned again when forward() changes them, and a different
sm_scale at run time is folded into the run's logit scale.
"""

import ctypes
import functools
import math
import types
import warnings

from . import _args as checks
from . import _ctypes_types as c_types
from . import _runtime
from ._dlpack import Borrowed, require_torch
from ._library import check, has, lib
from ._plan_owner import PlanOwner
from ._plans import Plan
from ._variant import variant_handle
from .errors import invalid_argument

# plan()'s optional arguments after page_size, in the order FlashInfer 0.7.2 still accepts them positionally.
_BATCH_DECODE_PLAN_LEGACY_POS_ARGS = (
    "pos_encoding_mode",
    "window_left",
    "logits_soft_cap",
    "q_data_type",
    "kv_data_type",
    "o_data_type",
    "data_type",
    "sm_scale",
    "rope_scale",
    "rope_theta",
    "non_blocking",
    "block_tables",
    "seq_lens",
    "fixed_split_size",
    "disable_split_kv",
    "q_len_per_req",
)


def _merge_legacy_positional(positional, kwargs):
    """plan()'s keyword arguments with the deprecated positional ones named, as FlashInfer 0.7.2 merges them
    (a TypeError for too many or for one given both ways)."""
    if len(positional) > len(_BATCH_DECODE_PLAN_LEGACY_POS_ARGS):
        raise TypeError(f"BatchDecodeWithPagedKVCacheWrapper.plan() accepts at most "
                        f"{len(_BATCH_DECODE_PLAN_LEGACY_POS_ARGS)} deprecated optional positional arguments after "
                        f"page_size; got {len(positional)}")
    merged = dict(kwargs)
    for name, value in zip(_BATCH_DECODE_PLAN_LEGACY_POS_ARGS, positional):
        if name in merged:
            raise TypeError(f"BatchDecodeWithPagedKVCacheWrapper.plan() got multiple values for argument {name!r}")
        merged[name] = value
    warnings.warn("Passing optional arguments to BatchDecodeWithPagedKVCacheWrapper.plan() positionally is "
                  "deprecated; pass them as keyword arguments instead.", DeprecationWarning, stacklevel=3)
    return merged


def _kv_lengths(indptr, last_page_len, page_size):
    """Each request's KV length from its page table (FlashInfer's get_seq_lens), on the host."""
    pages = indptr[1:] - indptr[:-1]
    return (pages - 1).clamp(min=0) * page_size + last_page_len


class BatchDecodeWithPagedKVCacheWrapper(PlanOwner):
    """Decode attention over a paged KV cache, FlashInfer's plan/run form.

    float_workspace_buffer: a CUDA uint8 tensor (128 MiB is plenty), scratch
    that other wrappers may share. use_cuda_graph: plans keep one grid and the
    page table goes into the three fixed int32 buffers (paged_kv_indptr_buffer
    [batch_size + 1], paged_kv_indices_buffer [max_num_pages],
    paged_kv_last_page_len_buffer [batch_size]), so a run() captured once
    replays correctly after a new plan(). The buffers are used in that mode only
    and refused otherwise. backend: 'auto' or 'fa2' (attnjit's kernels either
    way); jit_args (FlashInfer's custom JIT modules) is UNSUPPORTED.
    """

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, use_tensor_cores=False,
                 paged_kv_indptr_buffer=None, paged_kv_indices_buffer=None, paged_kv_last_page_len_buffer=None,
                 backend="auto", jit_args=None):
        torch = require_torch()
        checks.refuse_if_given(jit_args=jit_args)
        checks.refuse_unless("backend", backend, ("auto", "fa2"), "attnjit runs its own decode kernels")
        checks.kv_layout(kv_layout)
        self._use_cuda_graph = bool(checks.flag("use_cuda_graph", use_cuda_graph))
        self._use_tensor_cores = bool(checks.flag("use_tensor_cores", use_tensor_cores))
        buffers = {"paged_kv_indptr_buffer": paged_kv_indptr_buffer,
                   "paged_kv_indices_buffer": paged_kv_indices_buffer,
                   "paged_kv_last_page_len_buffer": paged_kv_last_page_len_buffer}
        for name, buf in buffers.items():
            if buf is None and self._use_cuda_graph:
                raise invalid_argument(f"{name}: is None but use_cuda_graph=True; allowed: a CUDA int32 tensor "
                                       "the captured graph reads")
            if buf is not None and not self._use_cuda_graph:
                raise invalid_argument(f"{name}: is given but use_cuda_graph=False; allowed: None (the fixed "
                                       "buffers serve CUDA-graph mode only)")
        for check_buffer in (checks.index_array, checks.cuda_tensor):
            for name, buf in buffers.items():
                if buf is not None:
                    check_buffer(torch, name, buf)
        self._own_workspaces(torch, float_workspace_buffer)
        self._fixed_batch_size = 0
        if self._use_cuda_graph:
            self._fixed_batch_size = len(paged_kv_last_page_len_buffer)
            if len(paged_kv_indptr_buffer) != self._fixed_batch_size + 1:
                raise invalid_argument(f"paged_kv_indptr_buffer: {len(paged_kv_indptr_buffer)} entries is not "
                                       f"allowed; allowed: batch_size + 1 = {self._fixed_batch_size + 1} (batch_size "
                                       "from paged_kv_last_page_len_buffer)")
        # FlashInfer's attribute names: serving engines write the page table into these buffers themselves.
        self._paged_kv_indptr_buf = paged_kv_indptr_buffer
        self._paged_kv_indices_buf = paged_kv_indices_buffer
        self._paged_kv_last_page_len_buf = paged_kv_last_page_len_buffer
        self._kv_layout = kv_layout
        self._backend = backend
        self._remake_plan()

    def _remake_plan(self):
        torch = require_torch()
        options = c_types.BatchDecodeWrapperOptions()
        lib().attnjit_batch_decode_wrapper_options_init(ctypes.byref(options))
        options.kv_layout = checks.kv_layout(self._kv_layout)
        options.use_cuda_graph = int(self._use_cuda_graph)
        options.use_tensor_cores = int(self._use_tensor_cores)
        pointer, nbytes, device = checks.workspace(torch, "float_workspace_buffer", self._float_workspace_buffer)
        options.device = device
        handle = ctypes.c_void_p()
        with Borrowed() as borrowed:
            check(lib().attnjit_batch_decode_wrapper_create(
                _runtime.handle(), pointer, nbytes, ctypes.byref(options),
                borrowed.optional(self._paged_kv_indptr_buf, "paged_kv_indptr_buffer"),
                borrowed.optional(self._paged_kv_indices_buf, "paged_kv_indices_buffer"),
                borrowed.optional(self._paged_kv_last_page_len_buf, "paged_kv_last_page_len_buffer"),
                ctypes.byref(handle)))
        plan = Plan(handle)
        self._adopt_int_workspace(plan.handle)
        self._replace_plan(plan)

    @property
    def plan_handle(self):
        """The attnjit ``Plan`` (describe(), workspace_bytes) behind this wrapper (an attnjit extension)."""
        return self._plan

    @property
    def use_tensor_cores(self):
        return self._use_tensor_cores

    @property
    def resolved_backend(self):
        """What backend='auto' resolved to: attnjit's decode kernels, FlashInfer's 'fa2' family."""
        return "fa2"

    @property
    def is_cuda_graph_enabled(self):
        return self._use_cuda_graph

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             *deprecated_positional_args, variant=None, **kwargs):
        """Plans one batch: indptr [batch + 1], indices [indptr[-1]], last_page_len [batch], int32, on any
        device (they are read on the host, as FlashInfer does). The optional arguments are keyword arguments;
        given positionally after page_size they take FlashInfer's legacy order (deprecated). variant (an attnjit
        extension, keyword-only): an attnjit.Variant for this plan's kernels, its values read at each run()."""
        if deprecated_positional_args:
            kwargs = _merge_legacy_positional(deprecated_positional_args, kwargs)
        variant_handle(variant)  # checked before anything changes
        self._variant = variant
        return self._plan_impl(indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                               **kwargs)

    begin_forward = plan

    def _plan_impl(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, *,
                   pos_encoding_mode="NONE", window_left=-1, window_right=0, logits_soft_cap=None,
                   q_data_type="float16", kv_data_type=None, o_data_type=None, data_type=None, sm_scale=None,
                   rope_scale=None, rope_theta=None, non_blocking=True, block_tables=None, seq_lens=None,
                   fixed_split_size=None, disable_split_kv=False, q_len_per_req=1, is_causal=None):
        plan_args = self._checked_plan_args(
            indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, pos_encoding_mode,
            window_left, window_right, logits_soft_cap, q_data_type, kv_data_type, o_data_type, data_type, sm_scale,
            rope_scale, rope_theta, non_blocking, block_tables, seq_lens, fixed_split_size, disable_split_kv,
            q_len_per_req, is_causal)
        self._host_page_table = plan_args.host
        self._batch_size, self._num_qo_heads, self._num_kv_heads = plan_args.batch, num_qo_heads, num_kv_heads
        self._head_dim, self._page_size = head_dim, page_size
        self._cached_q_data_type, self._cached_kv_data_type = plan_args.q_dtype, plan_args.kv_dtype
        self._cached_o_data_type = plan_args.o_dtype
        self._q_len_per_req, self._is_causal = 1, False
        # FlashInfer's plan state, which run() reads and forward() overwrites.
        self._pos_encoding_mode = plan_args.pos_encoding_mode
        self._window_left, self._window_right = plan_args.window_left, plan_args.window_right
        self._logits_soft_cap, self._sm_scale = plan_args.soft_cap, plan_args.sm_scale
        self._rope_scale, self._rope_theta = plan_args.rope_scale, plan_args.rope_theta
        self._plan_page_table()

    def _checked_plan_args(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                           pos_encoding_mode, window_left, window_right, logits_soft_cap, q_data_type, kv_data_type,
                           o_data_type, data_type, sm_scale, rope_scale, rope_theta, non_blocking, block_tables,
                           seq_lens, fixed_split_size, disable_split_kv, q_len_per_req, is_causal):
        """plan()'s arguments checked (what attnjit cannot honour refused), the page table read on the host; the
        wrapper is not touched (workspace_size() checks its arguments here too)."""
        torch = require_torch()
        for name, value in (("num_qo_heads", num_qo_heads), ("num_kv_heads", num_kv_heads),
                            ("head_dim", head_dim), ("page_size", page_size)):
            checks.positive_int(name, value)
        checks.pos_encoding(pos_encoding_mode)
        checks.window(window_left)
        checks.refuse_unless("window_right", window_right, (0,), "a right window bound is FlashInfer's cute-dsl "
                             "backend's only")
        soft_cap = checks.soft_cap(logits_soft_cap)
        q_dtype, kv_dtype, o_dtype = checks.plan_dtypes(torch, q_data_type, kv_data_type, o_data_type, data_type)
        for name, value in (("sm_scale", sm_scale), ("rope_scale", rope_scale), ("rope_theta", rope_theta)):
            checks.c_float(name, value)
        checks.flag("non_blocking", non_blocking)  # the copies are ordered on the stream either way
        checks.refuse_if_given(block_tables=block_tables)  # read by FlashInfer's trtllm-gen / cudnn backends only
        checks.split_controls(fixed_split_size, disable_split_kv)
        checks.positive_int("q_len_per_req", q_len_per_req)
        checks.refuse_unless("q_len_per_req", q_len_per_req, (1,), "the wrapper decodes one token per request "
                             "(trtllm_batch_decode_with_kv_cache takes several)")
        if is_causal is not None:
            checks.refuse_unless("is_causal", is_causal, (False,), "one query token per request sees its whole KV")
        host = {name: checks.host_int32(torch, name, value) for name, value in
                (("indptr", indptr), ("indices", indices), ("last_page_len", last_page_len))}
        batch = host["last_page_len"].numel()
        if self._use_cuda_graph and batch != self._fixed_batch_size:
            raise invalid_argument(f"last_page_len: batch size {batch} is not allowed in CUDA-graph mode; allowed: "
                                   f"{self._fixed_batch_size}, the buffers' batch size")
        if seq_lens is not None and host["indptr"].numel() == batch + 1:
            _check_seq_lens(torch, seq_lens, _kv_lengths(host["indptr"], host["last_page_len"], page_size))
        return types.SimpleNamespace(host=host, batch=batch, q_dtype=q_dtype, kv_dtype=kv_dtype, o_dtype=o_dtype,
                                     pos_encoding_mode=pos_encoding_mode, window_left=window_left,
                                     window_right=window_right, soft_cap=soft_cap, sm_scale=sm_scale,
                                     rope_scale=rope_scale, rope_theta=rope_theta)

    def workspace_size(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                       pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
                       kv_data_type=None, o_data_type=None, data_type=None, sm_scale=None, rope_scale=None,
                       rope_theta=None, block_tables=None, seq_lens=None, fixed_split_size=None,
                       disable_split_kv=False, q_len_per_req=1):
        """(float_workspace_size, int_workspace_size) in bytes that plan() with these arguments needs, as
        FlashInfer's: the scratch of float_workspace_buffer (plan() refuses a smaller one) and the plan memory it
        fills (what an int_workspace_buffer must hold). plan()'s checks and errors; nothing is allocated and the
        current plan stays as it was."""
        torch = require_torch()
        plan_args = self._checked_plan_args(
            indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, pos_encoding_mode,
            window_left, 0, logits_soft_cap, q_data_type, kv_data_type, o_data_type, data_type, sm_scale, rope_scale,
            rope_theta, True, block_tables, seq_lens, fixed_split_size, disable_split_kv, q_len_per_req, None)
        if not has("attnjit_batch_decode_wrapper_workspace_bytes"):
            raise checks.unsupported("workspace_size() needs a libattnjit with "
                                     "attnjit_batch_decode_wrapper_workspace_bytes")
        options = _plan_options(torch, plan_args.pos_encoding_mode, plan_args.window_left, plan_args.q_dtype,
                                plan_args.kv_dtype, plan_args.soft_cap, plan_args.sm_scale, plan_args.rope_scale,
                                plan_args.rope_theta)
        float_bytes, int_bytes = ctypes.c_size_t(), ctypes.c_size_t()
        with Borrowed() as borrowed, self._stream(torch):
            check(lib().attnjit_batch_decode_wrapper_workspace_bytes(
                self._plan.handle, borrowed.tensor(plan_args.host["indptr"], "indptr"),
                borrowed.tensor(plan_args.host["indices"], "indices"),
                borrowed.tensor(plan_args.host["last_page_len"], "last_page_len"), num_qo_heads, num_kv_heads, head_dim,
                page_size, ctypes.byref(options), ctypes.byref(float_bytes), ctypes.byref(int_bytes)))
        return float_bytes.value, int_bytes.value

    def _settings(self):
        """The options fixed at plan time, as run() would use them now (None folded to FlashInfer's defaults)."""
        return (self._pos_encoding_mode, self._window_left, checks.soft_cap(self._logits_soft_cap),
                1.0 if self._rope_scale is None else float(self._rope_scale),
                1e4 if self._rope_theta is None else float(self._rope_theta))

    def _plan_page_table(self):
        """Plans the C wrapper for the kept page table and the current plan state."""
        torch = require_torch()
        options = _plan_options(torch, self._pos_encoding_mode, self._window_left, self._cached_q_data_type,
                                self._cached_kv_data_type, self._logits_soft_cap, self._sm_scale, self._rope_scale,
                                self._rope_theta, getattr(self, "_variant", None))
        host = self._host_page_table
        self._planned = False

        def plan_call():
            with Borrowed() as borrowed, self._stream(torch) as stream:
                check(lib().attnjit_batch_decode_wrapper_plan(
                    self._plan.handle, borrowed.tensor(host["indptr"], "indptr"),
                    borrowed.tensor(host["indices"], "indices"),
                    borrowed.tensor(host["last_page_len"], "last_page_len"), self._num_qo_heads, self._num_kv_heads,
                    self._head_dim, self._page_size, ctypes.byref(options), stream))

        self._plan_with_room(torch, plan_call)
        self._planned = True
        self._planned_settings = self._settings()
        self._planned_sm_scale = self._default_sm_scale() if self._sm_scale is None else float(self._sm_scale)

    def _default_sm_scale(self):
        return 1.0 / math.sqrt(self._head_dim)

    def prewarm_paged_kv_stride_variant(self, variant="independent"):
        """FlashInfer loads a kernel variant for K and V of different strides here; attnjit's kernels read both
        strides at run time, so after plan() every run() is capturable as it is."""
        checks.refuse_unless("variant", variant, ("independent",), "the only paged-KV-stride variant FlashInfer has")
        self._require_planned()

    def forward(self, q, paged_kv_cache, pos_encoding_mode="NONE", q_scale=None, k_scale=None, v_scale=None,
                window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """FlashInfer's deprecated form of run(): its options replace plan()'s (planned again where they differ)."""
        self._pos_encoding_mode, self._window_left, self._logits_soft_cap = pos_encoding_mode, window_left, \
            logits_soft_cap
        self._sm_scale, self._rope_scale, self._rope_theta = sm_scale, rope_scale, rope_theta
        return self.run(q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale)

    def forward_return_lse(self, q, paged_kv_cache, pos_encoding_mode="NONE", q_scale=None, k_scale=None,
                           v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                           rope_theta=None):
        """forward() returning (o, lse)."""
        self._pos_encoding_mode, self._window_left, self._logits_soft_cap = pos_encoding_mode, window_left, \
            logits_soft_cap
        self._sm_scale, self._rope_scale, self._rope_theta = sm_scale, rope_scale, rope_theta
        return self.run(q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, return_lse=True)

    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, window_left=None, sinks=None, q_len_per_req=None,
            skip_softmax_threshold_scale_factor=None, kv_cache_sf=None):
        """o [batch, num_qo_heads, head_dim] in q's dtype, or (o, lse) with lse float32 [batch, num_qo_heads]
        in base 2. paged_kv_cache: one 5-D tensor [pages, 2, ...] or a (k_cache, v_cache) tuple. out / lse, when
        given, are checked and written in place. q_scale and k_scale multiply the softmax scale, v_scale the
        output, as in FlashInfer."""
        torch = require_torch()
        checks.no_extra_args(args)
        checks.refuse_if_given(sinks=sinks, skip_softmax_threshold_scale_factor=skip_softmax_threshold_scale_factor,
                               kv_cache_sf=kv_cache_sf)
        pdl = checks.tri_state("enable_pdl", enable_pdl)  # None: on for sm_90 and newer, as FlashInfer's
        self._require_planned("plan(indptr, indices, last_page_len, ...)")
        if q_len_per_req is not None:
            warnings.warn("Passing q_len_per_req to BatchDecodeWithPagedKVCacheWrapper.run() is deprecated; pass it "
                          "to plan() instead.", DeprecationWarning, stacklevel=2)
            checks.refuse_unless("q_len_per_req", q_len_per_req, (1,), "the wrapper decodes one token per request")
        self._check_run_against_plan(torch, window_left, q)
        checks.cuda_tensor(torch, "q", q)
        q_scale, k_scale, v_scale = (checks.scale(torch, name, value) for name, value in
                                     (("q_scale", q_scale), ("k_scale", k_scale), ("v_scale", v_scale)))
        k_cache, v_cache = checks.kv_cache_pair(torch, "paged_kv_cache", paged_kv_cache, kv_layout=self._kv_layout)
        self._plan_again_if_options_changed(torch, q.device, "pos_encoding_mode, window_left, logits_soft_cap, rope_scale and rope_theta", self._plan_page_table)
        logit_scale = self._logit_scale(q_scale, k_scale)
        out = checks.output(torch, "out", out, q.shape, self._cached_o_data_type, q.device)
        lse = checks.Lse(torch, lse, return_lse, q.shape[0], q.shape[1], q.device)
        with Borrowed() as borrowed, self._stream(torch, q.device) as stream:
            check(lib().attnjit_batch_decode_wrapper_run_v2(
                self._plan.handle, borrowed.tensor(q, "q"), borrowed.tensor(k_cache, "k_cache"),
                borrowed.optional(v_cache, "v_cache"), borrowed.tensor(out, "out"),
                borrowed.optional(lse.kernel, "lse"), 0.0 if logit_scale is None else logit_scale,
                0.0 if v_scale is None else v_scale, pdl, stream))
        return lse.finish(torch, out)

    run_return_lse = functools.partialmethod(run, return_lse=True)


def _plan_options(torch, pos_encoding_mode, window_left, q_dtype, kv_dtype, logits_soft_cap, sm_scale, rope_scale,
                  rope_theta, variant=None):
    """attnjit_batch_decode_plan_options_t of plan()'s options (plan() and workspace_size())."""
    options = c_types.BatchDecodePlanOptions()
    lib().attnjit_batch_decode_plan_options_init_sized(ctypes.byref(options), ctypes.sizeof(options))
    options.pos_encoding_mode = checks.pos_encoding(pos_encoding_mode)
    options.window_left = checks.window(window_left)
    options.q_data_type = c_types.DLDataType(*checks.dlpack_dtype(torch, "q_data_type", q_dtype), 1)
    options.kv_data_type = c_types.DLDataType(*checks.dlpack_dtype(torch, "kv_data_type", kv_dtype), 1)
    checks.set_score_options(options, logits_soft_cap, sm_scale, rope_scale, rope_theta)
    options.variant = variant_handle(variant)
    return options


def _check_seq_lens(torch, seq_lens, derived):
    """FlashInfer's plan() plans with seq_lens where given; attnjit's kernels read the page table, so the two
    must agree."""
    checks.index_array(torch, "seq_lens", seq_lens, allow_uint32=True)
    given = seq_lens.detach().to("cpu").to(torch.int64)
    if given.numel() != derived.numel():
        raise invalid_argument(f"seq_lens: {given.numel()} entries is not allowed; allowed: batch_size = "
                               f"{derived.numel()}")
    differ = (given != derived.to(torch.int64)).nonzero()
    if differ.numel():
        i = int(differ[0, 0])
        raise invalid_argument(f"seq_lens[{i}]={int(given[i])} is not allowed; allowed: {int(derived[i])}, the "
                               "length the page table (indptr, last_page_len, page_size) gives")


def fast_decode_plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                     pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type=None,
                     kv_data_type=None, data_type=None, sm_scale=None, rope_scale=None, rope_theta=None,
                     non_blocking=True, fixed_split_size=None, disable_split_kv=False, q_len_per_req=1,
                     global_override_indptr_cpu=None):
    """FlashInfer's fast_decode_plan: plan() for a BatchDecodeWithPagedKVCacheWrapper (`self`) that spares the
    device-to-host copies it can. Serving engines install it as ``wrapper.begin_forward = partial(
    fast_decode_plan, wrapper)``. global_override_indptr_cpu: indptr already on the host (int32), read instead
    of `indptr`; with page_size 1 every last page holds one row, so last_page_len is not read back either.
    attnjit's plan reads the page indices on the host, so indices[:indptr[-1]] is still copied from the device
    when it lives there."""
    torch = require_torch()
    if data_type is None and q_data_type is None:
        q_data_type = "float16"
    checks.positive_int("page_size", page_size)
    if global_override_indptr_cpu is not None:
        indptr = checks.host_int32(torch, "global_override_indptr_cpu", global_override_indptr_cpu)
    else:
        indptr = checks.host_int32(torch, "indptr", indptr)
    checks.index_array(torch, "last_page_len", last_page_len)
    if page_size == 1:
        last_page_len = torch.ones(last_page_len.shape[0], dtype=torch.int32)
    checks.index_array(torch, "indices", indices)
    used = int(indptr[-1]) if indptr.numel() else 0
    if used > indices.shape[0]:
        raise invalid_argument(f"indices: {indices.shape[0]} entries is not allowed; allowed: at least indptr[-1] = "
                               f"{used}")
    return self._plan_impl(indptr, indices[:used], last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                           pos_encoding_mode=pos_encoding_mode, window_left=window_left,
                           logits_soft_cap=logits_soft_cap, q_data_type=q_data_type, kv_data_type=kv_data_type,
                           data_type=data_type, sm_scale=sm_scale, rope_scale=rope_scale, rope_theta=rope_theta,
                           non_blocking=non_blocking, fixed_split_size=fixed_split_size,
                           disable_split_kv=disable_split_kv, q_len_per_req=q_len_per_req)

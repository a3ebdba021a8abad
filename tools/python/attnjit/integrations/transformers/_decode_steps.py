"""generate()'s decode steps on one plan per layer kind, planned again only when the keys outgrow it.

The DynamicCache hands every step new K/V tensors one key longer ([batch, kv_heads, kv_len, head_dim], made
by torch.cat). attnjit reads such a tensor in place as a paged cache of one page per request: the tensor is
the page array (page b is request b, every stride as it is), the page size a capacity of keys
(_capacity.capacity) and request b's last_page_len its kv_len. The page table lives in three int32 device
buffers owned here, as a FlashInfer CUDA-graph wrapper's (use_cuda_graph=True: plan() writes the table
there and every run reads it there), and the kernels clamp the planned chunks to the length they read. So
a step within the capacity costs one device write of its kv_len (a fill kernel, no host sync), made by the
step's first layer of the kind; the others launch on the kept plan and descriptors.

A step's plan depends on the call's dtype, batch, heads, head_dim, options and on whether a mask is asked
in the kernel (_decode_mask.py), never on kv_len or on the tensors' strides: layers of different kinds
(sliding and full, each with their own mask) keep a plan each.
"""

import collections

from . import _capacity, _decode_mask, _launch, _plans

_MAX_STEP_PLANS = 8  # layer kinds of the models in use; an evicted one frees its device memory

_step_plans = collections.OrderedDict()


def clear():
    """Drops every step plan (the caller holds _plans.LOCK)."""
    _step_plans.clear()


class StepKey:
    """What a step plan depends on; made once per call signature (_attention._Prepared). mask_window: a
    masked plan's sliding window, in the key only (the mask carries it), so that sliding and full layers each
    keep a plan and a bound mask."""

    __slots__ = ("key", "batch", "heads", "kv_heads", "head_dim", "dtype", "device", "window_left", "scaling",
                 "softcap", "masked")

    def __init__(self, query, kv_heads, window_left, scaling, softcap, masked, mask_window=None):
        self.batch, self.heads, _, self.head_dim = query.shape
        self.kv_heads, self.dtype, self.device = kv_heads, query.dtype, query.device
        self.window_left, self.scaling, self.softcap, self.masked = window_left, scaling, softcap, masked
        self.key = (str(self.device), str(self.dtype), self.batch, self.heads, kv_heads, self.head_dim, window_left,
                    scaling, softcap, masked, mask_window)


class Layout:
    """One call signature's tensors as the launch describes them: q [batch, heads, head_dim] (the query's
    single row), K and V as page arrays [batch, kv_heads, capacity, head_dim] with their own strides."""

    __slots__ = ("_q", "_k_strides", "_v_strides", "_shape", "_by_capacity")

    def __init__(self, query, kv_heads, k_strides, v_strides):
        batch, heads, _, dim = query.shape
        s = query.stride()
        self._q = ((batch, heads, dim), (s[0], s[1], s[3]))
        self._k_strides, self._v_strides = k_strides, v_strides
        self._shape = (batch, kv_heads, dim)
        self._by_capacity = {}

    def at(self, capacity):
        """The descriptors' (shape, strides) for DecodeLaunch.set_layout, one object per capacity."""
        got = self._by_capacity.get(capacity)
        if got is None:
            batch, kv_heads, dim = self._shape
            pages = (batch, kv_heads, capacity, dim)
            got = self._by_capacity[capacity] = (*self._q, pages, self._k_strides, pages, self._v_strides)
        return got


class StepPlan:
    """A CUDA-graph-mode batch decode wrapper over the page table above, the length state of its device
    buffer, the mask binding of a masked plan, and its launch."""

    __slots__ = ("step", "wrapper", "lengths", "state", "binding", "launch")

    def __init__(self, torch, step):
        from ...batch_decode import BatchDecodeWithPagedKVCacheWrapper

        device, batch = step.device, step.batch
        self.step = step
        indptr = torch.arange(batch + 1, dtype=torch.int32, device=device)
        indices = torch.arange(batch, dtype=torch.int32, device=device)
        self.lengths = torch.zeros(batch, dtype=torch.int32, device=device)
        self.wrapper = BatchDecodeWithPagedKVCacheWrapper(
            _plans.workspace(torch, device), kv_layout="HND", use_cuda_graph=True, paged_kv_indptr_buffer=indptr,
            paged_kv_indices_buffer=indices, paged_kv_last_page_len_buffer=self.lengths)
        self.state = _capacity.LengthState()
        self.binding = None
        self.launch = _launch.DecodeLaunch(torch, self.wrapper, batch, step.heads, step.head_dim, step.dtype, device)

    def _plan(self, torch, capacity):
        """Host work: the table of one page of `capacity` keys per request, planned full (the device lengths
        follow)."""
        s = self.step
        batch = s.batch
        variant = None if self.binding is None else self.binding.variant
        self.wrapper.plan(torch.arange(batch + 1, dtype=torch.int32), torch.arange(batch, dtype=torch.int32),
                          torch.full((batch,), capacity, dtype=torch.int32), s.heads, s.kv_heads, s.head_dim, capacity,
                          window_left=s.window_left, logits_soft_cap=s.softcap, sm_scale=s.scaling,
                          q_data_type=s.dtype, kv_data_type=s.dtype, variant=variant)
        _plans.plans_made["decode"] += 1

    def ready(self, torch, kv_len, mask):
        """Makes the plan serve a call of kv_len keys (and `mask`, for a masked plan); returns the launch's
        pdl argument (-1 the library's choice, 0 off: see _capacity.LengthState)."""
        if self.binding is None and self.step.masked:
            self.binding = _decode_mask.MaskBinding(torch, mask, self.step.batch)
        elif self.binding is not None:
            self.binding.bind(torch, mask, self.step.batch)  # a new step's mask; the step's other layers pass
        call = self.state.call(kv_len)
        if call.plan_capacity is not None:
            try:
                self._plan(torch, call.plan_capacity)
            except BaseException:
                self.state.forget()
                raise
        if call.write_length:
            self.lengths.fill_(kv_len)
            _plans.lengths_written["decode"] += 1
        return -1 if call.pdl else 0

    def run(self, torch, layout, query, key, value, pdl):
        """The launch on `layout` (a Layout.at() of this plan's capacity): [batch, 1, heads, head_dim]."""
        if self.launch.layout is not layout:
            self.launch.set_layout(layout)
        return self.launch(torch, query, key, value, pdl)


def plan_for(torch, step):
    """The StepPlan of a StepKey: kept, or made (the least recently used one dropped past _MAX_STEP_PLANS)."""
    plan = _step_plans.get(step.key)
    if plan is not None:
        _step_plans.move_to_end(step.key)
        return plan
    plan = _step_plans[step.key] = StepPlan(torch, step)
    if len(_step_plans) > _MAX_STEP_PLANS:
        _step_plans.popitem(last=False)
    return plan

"""Single-decode plans, memoized per problem (shapes, dtypes, device, options).

A plan compiles or loads its kernels once and knows its workspace size; a
decode loop asks for a new kv_len every step, so the cache is an LRU of
bounded size. Evicting destroys the C plan; that is safe while its launches
are still in flight because a launch copies its parameters and the kernels
belong to the Runtime, not to the plan.
"""

import collections
import ctypes
import threading

from . import _runtime
from ._library import check, lib

CAPACITY = 256

_lock = threading.Lock()
_plans = collections.OrderedDict()


class Plan:
    def __init__(self, handle):
        self.handle = handle
        size = ctypes.c_size_t()
        check(lib().attnjit_single_decode_plan_workspace_bytes(handle, ctypes.byref(size)))
        self.workspace_bytes = size.value

    def destroy(self):
        if self.handle:
            lib().attnjit_single_decode_plan_destroy(self.handle)
            self.handle = None


def _key(q, k, v, options, return_lse):
    fields = tuple(getattr(options, name) for name, _ in options._fields_)
    return (q.device.index, tuple(q.shape), q.dtype, tuple(k.shape), k.dtype, tuple(v.shape), v.dtype,
            fields, bool(return_lse))


def get(q, k, v, options, return_lse, borrowed):
    """The plan for this problem; ``borrowed`` turns tensors into DLTensors."""
    key = _key(q, k, v, options, return_lse)
    with _lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            return plan
    # Plan outside the lock: it may compile for seconds, and C validates the
    # tensors here (so a bad input fails with the library's message).
    handle = ctypes.c_void_p()
    check(lib().attnjit_single_decode_plan(
        _runtime.handle(), borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v"),
        ctypes.byref(options), int(bool(return_lse)), ctypes.byref(handle)))
    plan = Plan(handle)
    with _lock:
        existing = _plans.get(key)
        if existing is not None:  # another thread planned it meanwhile
            plan.destroy()
            return existing
        _plans[key] = plan
        while len(_plans) > CAPACITY:
            _plans.popitem(last=False)[1].destroy()
    return plan

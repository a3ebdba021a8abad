"""A plan of any operator: the C API's attnjit_plan_t, owned by Python.

Made by an operator's wrapper class (which also owns the plan's workspace),
inspected through the generic attnjit_plan_* functions, destroyed when the
object goes away. Destroying a plan while its launches are in flight is safe:
a launch copies its parameters and the kernels belong to the Runtime.
"""

import ctypes

from ._library import check, lib


class _OwnedHandle:
    """A C handle destroyed once: when asked, or when the object goes away."""

    _destroy_function = None  # the C function's name

    def __init__(self, handle):
        self.handle = handle

    def destroy(self):
        if self.handle:
            getattr(lib(), self._destroy_function)(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


class Plan(_OwnedHandle):
    _destroy_function = "attnjit_plan_destroy"

    def __init__(self, handle):
        self.handle = handle
        size = ctypes.c_size_t()
        check(lib().attnjit_plan_workspace_bytes(handle, ctypes.byref(size)))
        self.workspace_bytes = size.value
        self.operator = lib().attnjit_plan_operator(handle).decode()

    def describe(self):
        """The kernels, grid and split the plan chose."""
        needed = ctypes.c_size_t()
        check(lib().attnjit_plan_describe(self.handle, None, 0, ctypes.byref(needed)))
        buf = ctypes.create_string_buffer(needed.value)
        check(lib().attnjit_plan_describe(self.handle, buf, needed.value, None))
        return buf.value.decode()

    def __repr__(self):
        return f"<attnjit.Plan {self.operator}: {self.describe() if self.handle else 'destroyed'}>"


class BatchPrefillHandle(_OwnedHandle):
    """attnjit_batch_prefill_t, the batch prefill wrappers' C handle (attnjit.h's batch prefill functions)."""

    _destroy_function = "attnjit_batch_prefill_destroy"

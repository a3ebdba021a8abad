"""torch tensors → DLTensor pointers for one C call.

We ask torch for a DLPack capsule (torch.utils.dlpack.to_dlpack) and read
the DLManagedTensor* out of it with PyCapsule_GetPointer; its first member
is the DLTensor. We never consume the capsule (never rename it to
"used_dltensor" nor call its deleter ourselves): torch's capsule destructor
calls the deleter of an unconsumed capsule, which drops the reference to the
tensor, so keeping the capsule alive in a ``Borrowed`` for the duration of
the call is all the ownership handling needed, and dropping it afterwards
cleans up.

fp8: older torch refuses to export fp8 through DLPack, and DLPack 0.6 has no
fp8 codes. So fp8 tensors are exported viewed as uint8, and the C function
attnjit_dltensor_view_as writes a copy of that DLTensor re-labelled with
DLPack 1.1's fp8 code (attnjit_fp8.h), which every attnjit entry point takes.
"""

import ctypes

from . import _ctypes_types as c_types
from ._library import check, lib
from .errors import invalid_argument, missing_torch

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# DLManagedTensorVersioned (DLPack >= 1.0): version (2 x uint32), manager_ctx,
# deleter, flags (uint64), then the DLTensor.
_VERSIONED_OFFSET = 8 + ctypes.sizeof(ctypes.c_void_p) * 2 + 8


def _fp8_names(torch):
    names = {}
    for attr, name in (("float8_e4m3fn", b"float8_e4m3fn"), ("float8_e5m2", b"float8_e5m2")):
        dtype = getattr(torch, attr, None)  # absent in torch < 2.1
        if dtype is not None:
            names[dtype] = name
    return names


def require_torch():
    """``torch``, or a MissingDependencyError saying that torch is needed (not a bare ModuleNotFoundError)."""
    try:
        import torch
        import torch.utils.dlpack  # noqa: F401  (to_dlpack, used by Borrowed)
    except ImportError as e:
        raise missing_torch(e) from e
    return torch


class Borrowed:
    """Holds the capsules (and re-labelled DLTensors) of one call alive."""

    def __init__(self):
        self._keep = []

    def tensor(self, t, arg):
        """The address of a DLTensor describing torch tensor ``t``."""
        torch = require_torch()
        to_dlpack = torch.utils.dlpack.to_dlpack

        if not isinstance(t, torch.Tensor):
            raise invalid_argument(f"{arg}: expected a torch.Tensor, got {type(t).__name__}")
        fp8 = _fp8_names(torch).get(t.dtype)
        source = t.detach()  # DLPack export refuses tensors that require grad
        if fp8 is not None:
            source = source.view(torch.uint8)
        capsule = to_dlpack(source)
        self._keep.append(capsule)
        address = _dltensor_address(capsule, arg)
        if fp8 is None:
            return address
        relabelled = c_types.DLTensor()
        self._keep.append(relabelled)
        check(lib().attnjit_dltensor_view_as(address, fp8, ctypes.byref(relabelled)))
        return ctypes.addressof(relabelled)

    def optional(self, t, arg):
        return None if t is None else self.tensor(t, arg)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._keep.clear()  # capsule destructors release the tensors
        return False


def _dltensor_address(capsule, arg):
    if _is_valid(capsule, b"dltensor"):
        return _get_pointer(capsule, b"dltensor")  # DLManagedTensor: dl_tensor first
    if _is_valid(capsule, b"dltensor_versioned"):
        return _get_pointer(capsule, b"dltensor_versioned") + _VERSIONED_OFFSET
    raise invalid_argument(f"{arg}: to_dlpack returned a capsule that is neither 'dltensor' nor "
                           "'dltensor_versioned' (already consumed?)")

"""The decode launch of a kept plan at a few microseconds of host time.

Every layer of a generate() step calls the attention function with tensors of one shape, stride and dtype,
so the DLTensor descriptors the C call takes are built once per step (not exported through DLPack per
call): only their data pointers change. The library checks each descriptor against the plan as it does
for the wrapper's run(); the wrapper's own Python checks are what the caller already made (a planned
wrapper, the views dense_view made, an output it allocates).
"""

import ctypes

from ... import _ctypes_types as c_types
from ..._args import dlpack_dtype
from ..._library import check, lib

_DL_CUDA = 2  # DLDeviceType kDLCUDA
_CODES = {}  # torch dtype -> DLPack (code, bits)


class Descriptor:
    """A DLTensor for tensors of one shape, strides, dtype and device; point() aims it at one of them."""

    __slots__ = ("dl", "address", "_shape", "_strides")

    def __init__(self, torch, shape, strides, dtype, device):
        ndim = len(shape)
        self._shape = (ctypes.c_int64 * ndim)(*shape)
        self._strides = (ctypes.c_int64 * ndim)(*strides)
        code, bits = _CODES.get(dtype) or _CODES.setdefault(dtype, dlpack_dtype(torch, "tensor", dtype))
        self.dl = c_types.DLTensor(None, c_types.DLDevice(_DL_CUDA, device.index or 0), ndim,
                                   c_types.DLDataType(code, bits, 1), self._shape, self._strides, 0)
        self.address = ctypes.addressof(self.dl)

    def point(self, t):
        self.dl.data = t.data_ptr()  # data_ptr() already includes the storage offset
        return self.address


class DecodeLaunch:
    """BatchDecodeWithPagedKVCacheWrapper.run(q, (k, v)) for one plan and one step's layout, without the views:
    q is query [batch, heads, 1, head_dim] seen as [batch, heads, head_dim], K and V are key / value seen as
    the pages dense_view makes of them (the descriptors are made from the first call's views), and the output
    is a new [batch, 1, heads, head_dim] in q's dtype, written as [batch, heads, head_dim]."""

    __slots__ = ("_wrapper", "_q", "_k", "_v", "_out", "_out_shape")

    def __init__(self, torch, wrapper, q, k_view, v_view):
        self._wrapper = wrapper  # keeps the plan handle alive as long as this launch
        self._q, self._k, self._v = (Descriptor(torch, t.shape, t.stride(), t.dtype, t.device)
                                     for t in (q, k_view, v_view))
        batch, heads, dim = q.shape
        self._out_shape = (batch, 1, heads, dim)
        self._out = Descriptor(torch, (batch, heads, dim), (heads * dim, dim, 1), q.dtype, q.device)

    def matches(self, wrapper):
        return wrapper is self._wrapper

    def __call__(self, torch, query, key, value):
        """query, key, value: the attention call's tensors (of the layout the descriptors were made for)."""
        out = torch.empty(self._out_shape, dtype=query.dtype, device=query.device)
        stream = torch.cuda.current_stream(query.device).cuda_stream
        # lse none, k_scale / v_scale 0 (none: the planned sm_scale stands), enable_pdl -1 (the library's choice)
        check(lib().attnjit_batch_decode_wrapper_run_v2(
            self._wrapper.plan_handle.handle, self._q.point(query), self._k.point(key), self._v.point(value),
            self._out.point(out), None, 0.0, 0.0, -1, stream))
        return out

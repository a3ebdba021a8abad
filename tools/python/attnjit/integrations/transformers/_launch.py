"""The decode launch of a kept plan at a few microseconds of host time.

Every layer of a generate() step calls the attention function with tensors of one shape, stride and dtype,
so the DLTensor descriptors the C call takes are set once per step (not exported through DLPack per call):
only their data pointers change. The library checks each descriptor against the plan as it does for the
wrapper's run(); the wrapper's own Python checks are what the caller already made (a planned wrapper, the
layout _decode_steps describes, an output it allocates).
"""

import ctypes

from ... import _ctypes_types as c_types
from ..._args import dlpack_dtype
from ..._library import check, lib

_DL_CUDA = 2  # DLDeviceType kDLCUDA
_CODES = {}  # torch dtype -> DLPack (code, bits)


def stream_of(torch, device):
    """torch's current stream handle on `device` (the raw handle where torch offers it: no Stream object)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device.index if device.index is not None else torch.cuda.current_device())
    return torch.cuda.current_stream(device).cuda_stream


class Descriptor:
    """A DLTensor of a rank, dtype and device; set() gives it a shape and strides, point() aims it at data."""

    __slots__ = ("dl", "address", "_shape", "_strides")

    def __init__(self, torch, ndim, dtype, device):
        self._shape = (ctypes.c_int64 * ndim)()
        self._strides = (ctypes.c_int64 * ndim)()
        code, bits = _CODES.get(dtype) or _CODES.setdefault(dtype, dlpack_dtype(torch, "tensor", dtype))
        self.dl = c_types.DLTensor(None, c_types.DLDevice(_DL_CUDA, device.index or 0), ndim,
                                   c_types.DLDataType(code, bits, 1), self._shape, self._strides, 0)
        self.address = ctypes.addressof(self.dl)

    def set(self, shape, strides):
        for i, (n, s) in enumerate(zip(shape, strides)):
            self._shape[i], self._strides[i] = n, s
        return self

    def point(self, t):
        self.dl.data = t.data_ptr()  # data_ptr() already includes the storage offset
        return self.address


class DecodeLaunch:
    """BatchDecodeWithPagedKVCacheWrapper.run(q, (k, v)) for one plan, without the views: q is query [batch,
    heads, 1, head_dim] seen as [batch, heads, head_dim], K and V are the pages set_layout() describes (read in
    place), and the output is a new [batch, 1, heads, head_dim] in q's dtype, written as [batch, heads,
    head_dim]."""

    __slots__ = ("_wrapper", "_q", "_k", "_v", "_out", "_out_shape", "layout")

    def __init__(self, torch, wrapper, batch, heads, head_dim, dtype, device):
        self._wrapper = wrapper  # keeps the plan handle alive as long as this launch
        self._q, self._k, self._v = (Descriptor(torch, n, dtype, device) for n in (3, 4, 4))
        self._out_shape = (batch, 1, heads, head_dim)
        self._out = Descriptor(torch, 3, dtype, device).set((batch, heads, head_dim), (heads * head_dim, head_dim, 1))
        self.layout = None  # what set_layout() was last given

    def set_layout(self, layout):
        """layout: (q shape, q strides, K shape, K strides, V shape, V strides), in elements."""
        q_shape, q_strides, k_shape, k_strides, v_shape, v_strides = layout
        self._q.set(q_shape, q_strides)
        self._k.set(k_shape, k_strides)
        self._v.set(v_shape, v_strides)
        self.layout = layout

    def __call__(self, torch, query, key, value, pdl):
        """query, key, value: the attention call's tensors (of the layout set last). pdl: -1 the library's
        choice, 0 off."""
        out = torch.empty(self._out_shape, dtype=query.dtype, device=query.device)
        stream = stream_of(torch, query.device)
        # lse none, k_scale / v_scale 0 (none: the planned sm_scale stands)
        check(lib().attnjit_batch_decode_wrapper_run_v2(
            self._wrapper.plan_handle.handle, self._q.point(query), self._k.point(key), self._v.point(value),
            self._out.point(out), None, 0.0, 0.0, pdl, stream))
        return out

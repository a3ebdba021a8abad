"""What the binding tests (test_*_binding.py) pass to libattnjit's C functions
when they call them directly: DLTensors over a fake device pointer, which the
refusals under test never reach, and the library's last error message.
"""

import ctypes

from attnjit import _ctypes_types as c_types
from attnjit._library import lib

FAKE_DEVICE_POINTER = 0x7F0000000000  # never dereferenced: nothing here reaches a device
CUDA, CPU = 2, 1  # DLPack device types

# DLPack (type code, bits) of the dtypes the tests name.
I32, I64, U8 = (0, 32), (0, 64), (1, 8)
F16, F32, BF16, BOOL = (2, 16), (2, 32), (4, 16), (6, 8)


def dltensor(shape, dtype=F16, device_type=CUDA, device_id=0):
    """A DLTensor of `shape` and `dtype`, with the shape array it points into:
    keep that array alive as long as the tensor."""
    arr = (ctypes.c_int64 * len(shape))(*shape)
    t = c_types.DLTensor()
    t.data = FAKE_DEVICE_POINTER
    t.device = c_types.DLDevice(device_type, device_id)
    t.ndim = len(shape)
    t.dtype = c_types.DLDataType(dtype[0], dtype[1], 1)
    t.shape = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))
    return t, arr


def last_error():
    return lib().attnjit_last_error().decode()

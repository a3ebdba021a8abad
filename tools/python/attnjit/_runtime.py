"""The module's one attnjit Runtime, created on first use.

Never destroyed: at interpreter exit the CUDA driver and other frameworks tear
down in an order we do not control, and unloading kernels from an atexit hook
could run after the context is gone. The process exit reclaims it.
"""

import ctypes
import threading

from ._library import check, lib

_lock = threading.Lock()
_handle = None


def handle():
    """The runtime's C handle (a ctypes.c_void_p), configured from the environment."""
    global _handle
    if _handle is not None:
        return _handle
    with _lock:
        if _handle is None:
            h = ctypes.c_void_p()
            check(lib().attnjit_runtime_create(ctypes.byref(h)))
            _handle = h
    return _handle

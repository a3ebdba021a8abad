"""The module's one attnjit Runtime, created on first use.

Never destroyed: at interpreter exit the CUDA driver and other frameworks tear
down in an order we do not control, and unloading kernels from an atexit hook
could run after the context is gone. The process exit reclaims it.
"""

import ctypes
import threading

from ._library import check, has, lib

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


def check_tables(device=None):
    """Waits for `device` (an ordinal, a torch.device, or None: torch's current one), then raises AttnjitError
    INVALID_ARGUMENT naming a bad entry of a device table (a page id past the cache, a length past
    max_seq_len, an append's position outside its request) that trtllm_batch_decode_with_kv_cache,
    cudnn_batch_decode_with_kv_cache or append_paged_kv_cache met on it since the last report. Each of them
    also raises one at its start, without waiting; the wrappers have check() for their own tables."""
    if device is None or not isinstance(device, int):
        from ._dlpack import require_torch

        torch = require_torch()
        device = torch.device("cuda") if device is None else torch.device(device)
        device = device.index if device.index is not None else torch.cuda.current_device()
    if has("attnjit_runtime_check"):
        check(lib().attnjit_runtime_check(handle(), device))

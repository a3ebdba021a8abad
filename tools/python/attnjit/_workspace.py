"""The per-device scratch buffer plans ask for (split-KV partial results).

One torch uint8 buffer per device, DEFAULT_BYTES to start, grown when a plan
needs more. Like FlashInfer's own workspace buffers it is shared by every
call on the device: calls on two streams that overlap in time would share it
too, so callers running attnjit concurrently on several streams should
serialize them or use the C API with workspaces of their own.
"""

import threading

DEFAULT_BYTES = 128 << 20

_lock = threading.Lock()
_buffers = {}  # device index -> torch.uint8 tensor


def get(device, nbytes):
    """A buffer of at least ``nbytes`` on ``device`` (a torch.device), or None for 0."""
    if nbytes == 0:
        return None
    import torch

    with _lock:
        buf = _buffers.get(device.index)
        if buf is None or buf.numel() < nbytes:
            # Drop the old one first so the caching allocator can reuse its memory.
            _buffers.pop(device.index, None)
            buf = torch.empty(max(DEFAULT_BYTES, nbytes), dtype=torch.uint8, device=device)
            _buffers[device.index] = buf
        return buf

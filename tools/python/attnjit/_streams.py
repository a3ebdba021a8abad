"""The CUDA stream a call runs on: torch's current stream of the data's device."""
import contextlib


@contextlib.contextmanager
def current_stream(torch, device):
    """Inside `device`'s context, yields torch's current stream handle on it.

    A device that is not a CUDA device yields None (the default stream): the
    library then refuses the tensor with a message naming it, which is the
    error the caller should see, rather than torch's own about the device.
    """
    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if device.type != "cuda":
        yield None
        return
    with torch.cuda.device(device):
        yield torch.cuda.current_stream(device).cuda_stream

"""Argument checks and conversions the three batch decode entry points share.

Everything here runs before the library is called, so a wrong argument is
an AttnjitError naming it, its value and what is allowed, before any GPU work.
"""

import math

from .errors import AttnjitError, Status, invalid_argument

KV_LAYOUTS = {"NHD": 0, "HND": 1}


def unsupported(message):
    return AttnjitError(Status.UNSUPPORTED, message)


def refuse_if_given(**arguments):
    """Unsupported error for the first argument that is not None (features attnjit lacks)."""
    for name, value in arguments.items():
        if value is not None:
            raise unsupported(f"{name}={_short(value)} is not supported by attnjit yet; allowed: None")


def _short(value):
    text = repr(value) if not hasattr(value, "shape") else f"<tensor of shape {list(value.shape)}>"
    return text if len(text) <= 60 else text[:57] + "..."


def kv_layout(value, name="kv_layout"):
    if value not in KV_LAYOUTS:
        raise invalid_argument(f"{name}={value!r} is not a KV layout; allowed: NHD, HND")
    return KV_LAYOUTS[value]


def flag(name, value):
    if not isinstance(value, bool) and value not in (0, 1):
        raise invalid_argument(f"{name}={value!r} is not allowed; allowed: True, False")
    return int(bool(value))


def tri_state(name, value):
    """None -> -1 (the library decides), True / False -> 1 / 0, as the C options' tri-state fields."""
    if value is None:
        return -1
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return int(bool(value))
    raise invalid_argument(f"{name}={value!r} is not allowed; allowed: None (the library's default), True, False")


def positive_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < 2**31:
        raise invalid_argument(f"{name}={value!r} is not allowed; allowed: an int >= {minimum}")
    return value


def window(value, name="window_left"):
    if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value < 2**31:
        raise invalid_argument(f"{name}={value!r} is not allowed; allowed: -1 (whole sequence) or an int >= 0")
    return value


def scale(torch, name, value, default):
    """A float scale > 0; a tensor (a device scale) is refused as unsupported."""
    if value is None:
        return default
    if isinstance(value, torch.Tensor):
        raise unsupported(f"{name}: a tensor scale is not supported yet; allowed: a Python float > 0")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise invalid_argument(f"{name}={value!r} is not allowed; allowed: a float > 0") from None
    if not math.isfinite(value) or value <= 0.0:
        raise invalid_argument(f"{name}={value} is not allowed; allowed: a finite float > 0")
    return value


def scale_or_tensor(torch, name, value, default):
    """TensorRT-LLM's ``float | Tensor`` scale: (the float, None), or (default, the tensor) for a float32
    tensor of one value (shape [] or [1]), which the kernels read on the device each time they run -- a
    CUDA graph replays with whatever it holds then. Not converted: a copy would be a new tensor per call.
    Its device is checked by the library, against the query's."""
    if not isinstance(value, torch.Tensor):
        return scale(torch, name, value, default), None
    if value.dtype != torch.float32:
        raise invalid_argument(f"{name}: dtype {value.dtype} is not allowed; allowed: torch.float32 (a tensor the "
                               "kernels read), or a Python float")
    if value.dim() > 1 or value.numel() != 1:
        raise invalid_argument(f"{name}: shape {list(value.shape)} is not allowed; allowed: [] or [1] (one value), "
                               "or a Python float")
    return default, value


def together(first, first_value, second, second_value):
    """Arguments that must be given together (both None, or neither)."""
    if (first_value is None) == (second_value is None):
        return
    given, value, missing = ((first, first_value, second) if first_value is not None
                             else (second, second_value, first))
    raise invalid_argument(f"{given}={_short(value)} is not allowed without {missing}; they go together "
                           f"(allowed: both {first} and {second}, or neither)")


def tensor(torch, name, value):
    if not isinstance(value, torch.Tensor):
        raise invalid_argument(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    return value


def cuda_tensor(torch, name, value):
    tensor(torch, name, value)
    if not value.is_cuda:
        raise invalid_argument(f"{name}: device {value.device} is not allowed; allowed: a CUDA tensor")
    return value


def workspace(torch, name, value):
    """(pointer, bytes, device index) of a contiguous CUDA buffer."""
    cuda_tensor(torch, name, value)
    if not value.is_contiguous():
        raise invalid_argument(f"{name}: a non-contiguous tensor is not allowed; allowed: a contiguous CUDA buffer")
    return value.data_ptr(), value.numel() * value.element_size(), value.device.index or 0


def host_int32(torch, name, value):
    """A 1-D integer tensor as a contiguous int32 CPU tensor (the page table is read on the host)."""
    tensor(torch, name, value)
    if value.dtype not in (torch.int32, torch.int64):
        raise invalid_argument(f"{name}: dtype {value.dtype} is not allowed; allowed: torch.int32, torch.int64")
    if value.dim() != 1:
        raise invalid_argument(f"{name}: shape {list(value.shape)} is not allowed; allowed: 1-D")
    host = value.detach().to("cpu")
    if host.dtype == torch.int64 and host.numel() and (host.max() >= 2**31 or host.min() < -2**31):
        raise invalid_argument(f"{name}: values from {host.min().item()} to {host.max().item()} do not fit "
                               "int32; allowed: int32 values")
    return host.to(torch.int32).contiguous()


def device_int32(torch, name, value, device, allow_uint32=False):
    """An integer tensor as a contiguous int32 tensor on `device` (a copy only when it is not one already)."""
    tensor(torch, name, value)
    allowed = [torch.int32, torch.int64] + ([getattr(torch, "uint32")] if allow_uint32 and
                                            hasattr(torch, "uint32") else [])
    if value.dtype not in allowed:
        raise invalid_argument(f"{name}: dtype {value.dtype} is not allowed; allowed: "
                               + ", ".join(str(d) for d in allowed))
    if value.dtype != torch.int32:
        value = value.to(torch.int32)
    return value.to(device).contiguous()


def dtype_of(torch, name, value):
    """A torch dtype from a dtype or its name ("float16", "bfloat16", "float8_e4m3fn", ...)."""
    if isinstance(value, str):
        resolved = getattr(torch, value, None)
        if not isinstance(resolved, torch.dtype):
            raise invalid_argument(f"{name}={value!r} is not a dtype; allowed: float16, bfloat16, float32, "
                                   "float8_e4m3fn, float8_e5m2 (names or torch dtypes)")
        return resolved
    if not isinstance(value, torch.dtype):
        raise invalid_argument(f"{name}={value!r} is not a dtype; allowed: a torch.dtype or its name")
    return value


def dlpack_dtype(torch, name, dtype):
    """(code, bits) of DLPack for a dtype attnjit computes in (fp8 with DLPack 1.1's codes)."""
    codes = {torch.float16: (2, 16), torch.bfloat16: (4, 16), torch.float32: (2, 32)}
    for attr, code in (("float8_e4m3fn", 10), ("float8_e5m2", 12)):
        if hasattr(torch, attr):
            codes[getattr(torch, attr)] = (code, 8)
    if dtype not in codes:
        raise invalid_argument(f"{name}={dtype} is not supported; allowed: float16, bfloat16, float32, "
                               "float8_e4m3fn, float8_e5m2")
    return codes[dtype]


def kv_cache_pair(torch, name, value):
    """(k, v) of a (k, v) tuple, or (kv, None) for the single 5-D tensor [pages, 2, ...]."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise invalid_argument(f"{name}: a {type(value).__name__} of {len(value)} tensors is not allowed; "
                                   "allowed: (k_cache, v_cache) or one 5-D tensor")
        return tensor(torch, f"{name}[0]", value[0]), tensor(torch, f"{name}[1]", value[1])
    tensor(torch, name, value)
    if value.dim() != 5:
        raise invalid_argument(f"{name}: shape {list(value.shape)} is not allowed; allowed: a 5-D tensor "
                               "[pages, 2, ...] or a (k_cache, v_cache) tuple of 4-D tensors")
    return value, None

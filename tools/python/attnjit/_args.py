"""Argument checks and conversions shared by every operator module.

Everything here runs before the library is called, so a wrong argument is
an AttnjitError naming it, its value and what is allowed, before any GPU
work: INVALID_ARGUMENT for a value FlashInfer refuses too, UNSUPPORTED for
one FlashInfer computes and attnjit does not. torch is passed in by the
caller (imported inside calls), so this module imports without it.
"""

import math

from .errors import AttnjitError, Status, invalid_argument

KV_LAYOUTS = {"NHD": 0, "HND": 1}  # attnjit_kv_layout_t
POS_ENCODINGS = {"NONE": 0, "ROPE_LLAMA": 1, "ALIBI": 2}  # attnjit_pos_encoding_t
PREFILL_BACKENDS = {"auto": 0, "fa2": 1, "fa3": 2, "fa3_ws": 3}  # attnjit_prefill_backend_t
_BACKEND_LIST = ", ".join(repr(b) for b in PREFILL_BACKENDS)
LSE_BASES = ("log2", "ln")  # FlashInfer 0.7.2's: the kernels write base 2; "ln" is rescaled after
LSE_LAYOUTS = ("NH", "HN")  # [tokens, heads] as the kernels write, or its transpose
LN2 = math.log(2.0)


def unsupported(message):
    return AttnjitError(Status.UNSUPPORTED, message)


def short(value):
    """A value as an error message shows it: a tensor by its shape and dtype, anything else by repr."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"<tensor of shape {list(value.shape)}, {value.dtype}>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def refuse_if_given(**arguments):
    """UNSUPPORTED for the first argument that is not None (a FlashInfer feature attnjit lacks)."""
    for name, value in arguments.items():
        if value is not None:
            raise unsupported(f"{name}={short(value)} is not supported by attnjit; allowed: None")


def refuse_unless(name, value, allowed, why):
    """UNSUPPORTED unless `value` is one of `allowed` (the values attnjit honours)."""
    if value not in allowed:
        raise unsupported(f"{name}={short(value)} is not supported: {why}; allowed: "
                          + ", ".join(repr(a) for a in allowed))


def no_extra_args(args):
    """FlashInfer's run(*args) feeds a custom JIT module's extra tensors; attnjit has no such module."""
    if args:
        raise unsupported(f"*args: {len(args)} extra positional argument(s) ({', '.join(short(a) for a in args)}) "
                          "are not supported: they feed FlashInfer's custom JIT modules (jit_args), which attnjit "
                          "does not have; allowed: none")


def kv_layout(value, name="kv_layout"):
    if value not in KV_LAYOUTS:
        raise invalid_argument(f"{name}={value!r} is not a KV layout; allowed: 'NHD', 'HND'")
    return KV_LAYOUTS[value]


def pos_encoding(value, name="pos_encoding_mode"):
    if value not in POS_ENCODINGS:
        raise invalid_argument(f"{name}={value!r} is not a positional encoding; allowed: 'NONE', 'ROPE_LLAMA', "
                               "'ALIBI'")
    return POS_ENCODINGS[value]


# FlashInfer 0.7.2's other prefill backends: its own implementations, which attnjit does not have.
FLASHINFER_ONLY_PREFILL_BACKENDS = ("cudnn", "trtllm-gen", "cutlass", "cute-dsl", "cute-dsl-prims", "fmha_v2",
                                    "cutile")


def prefill_backend(value, name="backend"):
    if value in FLASHINFER_ONLY_PREFILL_BACKENDS:
        raise unsupported(f"{name}={value!r} is not supported: attnjit runs its own kernels; allowed: {_BACKEND_LIST}")
    if not isinstance(value, str) or value not in PREFILL_BACKENDS:
        raise invalid_argument(f"{name}={short(value)} is not a backend; allowed: {_BACKEND_LIST}")
    return PREFILL_BACKENDS[value]


def flag(name, value):
    if not isinstance(value, bool) and value not in (0, 1):
        raise invalid_argument(f"{name}={value!r} is not allowed; allowed: True, False")
    return int(bool(value))


def tri_state(name, value):
    """None -> -1 (the library decides), True / False -> 1 / 0, as the C API's tri-state ints."""
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


def finite_float(name, value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise invalid_argument(f"{name}={short(value)} is not allowed; allowed: a float") from None
    if not math.isfinite(value):
        raise invalid_argument(f"{name}={value} is not allowed; allowed: a finite float")
    return value


def c_float(name, value, zero_allowed=False):
    """An optional float for a C options field, where 0 means "not provided" (FlashInfer's default).

    An explicit 0 could not be told from None there, so it is refused rather
    than silently read as the default, except where 0 already is the default.
    """
    if value is None:
        return 0.0
    value = finite_float(name, value)
    if value == 0.0 and not zero_allowed:
        raise invalid_argument(f"{name}=0.0 is not allowed; allowed: a non-zero float, or None for the default")
    return value


def soft_cap(value, name="logits_soft_cap"):
    """FlashInfer's logits_soft_cap: None or 0 means no capping, else a finite float > 0."""
    if value is None:
        return 0.0
    value = finite_float(name, value)
    if value < 0.0:
        raise invalid_argument(f"{name}={value} is not allowed; allowed: None or 0 (no capping), or a float > 0")
    return value


def set_score_options(options, logits_soft_cap, sm_scale, rope_scale, rope_theta):
    """The score fields every attention options struct has: soft cap, softmax scale, RoPE scale and theta (0.0 for
    None: the library's default)."""
    options.logits_soft_cap = soft_cap(logits_soft_cap)
    options.sm_scale = c_float("sm_scale", sm_scale)
    options.rope_scale = c_float("rope_scale", rope_scale)
    options.rope_theta = c_float("rope_theta", rope_theta)


def scale(torch, name, value):
    """An optional calibration scale: None (1.0), or a finite Python float > 0; a tensor is UNSUPPORTED."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        raise unsupported(f"{name}: a tensor scale ({short(value)}) is not supported here; allowed: None or a "
                          "Python float > 0")
    value = finite_float(name, value)
    if value <= 0.0:
        raise invalid_argument(f"{name}={value} is not allowed; allowed: a finite float > 0")
    return value


def scale_or_tensor(torch, name, value, default):
    """TensorRT-LLM's ``float | Tensor`` scale: (the float, None), or (default, the tensor) for a float32
    tensor of one value (shape [] or [1]), which the kernels read on the device each time they run -- a
    CUDA graph replays with whatever it holds then. Its device is checked by the library, against the
    query's."""
    if not isinstance(value, torch.Tensor):
        given = scale(torch, name, value)
        return (default if given is None else given), None
    if value.dtype != torch.float32:
        raise invalid_argument(f"{name}: dtype {value.dtype} is not allowed; allowed: torch.float32 (a tensor the "
                               "kernels read), or a Python float")
    if value.dim() > 1 or value.numel() != 1:
        raise invalid_argument(f"{name}: shape {list(value.shape)} is not allowed; allowed: [] or [1] (one value), "
                               "or a Python float")
    return default, value


def product(*factors):
    """The product of the factors that are not None, or None when all are None."""
    given = [f for f in factors if f is not None]
    if not given:
        return None
    result = 1.0
    for f in given:
        result *= f
    return result


def together(first, first_value, second, second_value):
    """Arguments that must be given together (both None, or neither)."""
    if (first_value is None) == (second_value is None):
        return
    given, value, missing = ((first, first_value, second) if first_value is not None
                             else (second, second_value, first))
    raise invalid_argument(f"{given}={short(value)} is not allowed without {missing}; they go together "
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


def _index_dtypes(torch, allow_uint32):
    allowed = [torch.int32]
    if allow_uint32 and hasattr(torch, "uint32"):
        allowed.append(torch.uint32)
    return allowed


def index_array(torch, name, value, ndim=1, allow_uint32=False):
    """An index array as FlashInfer's kernels read it: int32 (uint32 where FlashInfer's kernels take it too).

    Other dtypes are refused by name rather than cast: a silent cast would
    copy every step and hide a caller's type mistake.
    """
    tensor(torch, name, value)
    allowed = _index_dtypes(torch, allow_uint32)
    if value.dtype not in allowed:
        raise invalid_argument(f"{name}: dtype {value.dtype} is not allowed; allowed: "
                               + ", ".join(str(d) for d in allowed))
    if ndim is not None and value.dim() != ndim:
        raise invalid_argument(f"{name}: shape {list(value.shape)} is not allowed; allowed: {ndim}-D")
    return value


def host_int32(torch, name, value):
    """A 1-D int32 tensor read on the host (the plan reads the page table there): a contiguous CPU tensor, copied
    from the device when it lives there, as FlashInfer's plan() copies it."""
    index_array(torch, name, value)
    return value.detach().to("cpu").contiguous()


def device_index(torch, name, value, device, ndim=1, allow_uint32=False):
    """An index array the kernels read on `device`: int32 (or uint32), contiguous; a CPU tensor is copied there."""
    index_array(torch, name, value, ndim=ndim, allow_uint32=allow_uint32)
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
        raise invalid_argument(f"{name}={short(value)} is not a dtype; allowed: a torch.dtype or its name")
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


def dtype_name(torch, name, dtype):
    """"float16", "bfloat16", "float8_e4m3fn", ... for the C functions that take a dtype by name."""
    dlpack_dtype(torch, name, dtype)  # refuses what attnjit does not compute in
    return str(dtype).replace("torch.", "")


def plan_dtypes(torch, q_data_type, kv_data_type, o_data_type, data_type=None, fp8_q_output=False):
    """(q, kv, o) torch dtypes as FlashInfer's plan() resolves them: data_type (deprecated) fills whichever of
    q_data_type / kv_data_type is None, kv defaults to q, and o defaults to q's and must be q's (attnjit writes
    o in q's dtype), but for float8_e4m3fn q where fp8_q_output (batch prefill: the C side checks it then)."""
    if data_type is not None:
        if q_data_type is None:
            q_data_type = data_type
        if kv_data_type is None:
            kv_data_type = data_type
    if q_data_type is None:
        raise invalid_argument("q_data_type=None is not allowed without data_type; allowed: a dtype or its name")
    q = dtype_of(torch, "q_data_type", q_data_type)
    kv = q if kv_data_type is None else dtype_of(torch, "kv_data_type", kv_data_type)
    if o_data_type is not None:
        o = dtype_of(torch, "o_data_type", o_data_type)
        if fp8_q_output and q == getattr(torch, "float8_e4m3fn", None):
            return q, kv, o
        if o != q:
            raise unsupported(f"o_data_type={o} is not supported: attnjit writes the output in the query's dtype; "
                              f"allowed: None or q_data_type ({q})")
    return q, kv, q


def o_dtype_code(torch, name, o_dtype, q_dtype):
    """attnjit_prefill_options_t.o_dtype for an output dtype: bits 0 where it is q's (the default)."""
    from ._ctypes_types import DLDataType

    if o_dtype is None or o_dtype == q_dtype:
        return DLDataType(0, 0, 0)
    return DLDataType(*dlpack_dtype(torch, name, o_dtype), 1)


def head_dims(head_dim_qk, head_dim_vo):
    """FlashInfer's (head_dim_qk, head_dim_vo): attnjit's kernels take one head_dim for both."""
    positive_int("head_dim_qk", head_dim_qk)
    if head_dim_vo is not None and head_dim_vo != head_dim_qk:
        raise unsupported(f"head_dim_vo={head_dim_vo!r} is not supported: attnjit's kernels take one head_dim for "
                          f"Q/K and V/O; allowed: None or head_dim_qk ({head_dim_qk})")
    return head_dim_qk


def use_fp16_qk_reduction(value, name="use_fp16_qk_reduction"):
    if flag(name, value):
        raise unsupported(f"{name}=True is not supported: attnjit accumulates q.k in fp32 (its result would differ "
                          "from FlashInfer's fp16 reduction); allowed: False")


def split_controls(fixed_split_size, disable_split_kv):
    """FlashInfer's batch-invariance controls: attnjit's planner chooses the split itself."""
    if fixed_split_size is not None and fixed_split_size != -1:
        raise unsupported(f"fixed_split_size={short(fixed_split_size)} is not supported: attnjit's planner chooses "
                          "the KV split; allowed: None or -1")
    if flag("disable_split_kv", disable_split_kv):
        raise unsupported("disable_split_kv=True is not supported: attnjit's planner chooses the KV split; "
                          "allowed: False")


def kv_cache_pair(torch, name, value, split=False, kv_layout=None):
    """(k, v) of a (k, v) tuple of 4-D caches, or of one 5-D tensor: [pages, 2, ...] (K at [:, 0], V at
    [:, 1]) or [pages, 1, ...] (its one entry is both K and V). A [pages, 2, ...] tensor comes back as
    (it, None), the form the batch decode C functions take, unless `split` asks for the two 4-D views.
    With the wrapper's kv_layout, page size 1 may drop its axis, as FlashInfer allows: 3-D caches in a
    tuple ([slots, heads, D], SGLang's token pool) and a 4-D single tensor ([slots, 2, heads, D])."""
    def with_page_axis(t, full_rank):
        if kv_layout is None or t.dim() != full_rank - 1:
            return t
        return t.unsqueeze(-3) if kv_layout == "NHD" else t.unsqueeze(-2)  # [.., page_size=1, ..]

    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise invalid_argument(f"{name}: a {type(value).__name__} of {len(value)} tensors is not allowed; "
                                   "allowed: (k_cache, v_cache) or one 5-D tensor")
        return tuple(with_page_axis(tensor(torch, f"{name}[{i}]", t), 4) for i, t in enumerate(value))
    value = with_page_axis(tensor(torch, name, value), 5)
    if value.dim() != 5 or value.shape[1] not in (1, 2):
        raise invalid_argument(f"{name}: shape {list(value.shape)} is not allowed; allowed: a 5-D tensor "
                               "[pages, 2, ...] (or [pages, 1, ...]: K and V are one) or a (k_cache, v_cache) "
                               "tuple of 4-D tensors")
    if value.shape[1] == 1:
        return value[:, 0], value[:, 0]
    return (value[:, 0], value[:, 1]) if split else (value, None)


def output(torch, name, given, shape, dtype, device):
    """The caller's `out` (checked: shape, dtype, device) to be written in place, or a new tensor."""
    shape = tuple(int(s) for s in shape)
    if given is None:
        return torch.empty(shape, dtype=dtype, device=device)
    tensor(torch, name, given)
    if tuple(given.shape) != shape:
        raise invalid_argument(f"{name}: shape {list(given.shape)} is not allowed; allowed: {list(shape)}")
    if given.dtype != dtype:
        raise invalid_argument(f"{name}: dtype {given.dtype} is not allowed; allowed: {dtype}")
    if given.device != torch.device(device):
        raise invalid_argument(f"{name}: device {given.device} is not allowed; allowed: {device} (the query's)")
    return given


class Lse:
    """FlashInfer's lse=, return_lse, lse_base and lse_layout for one run().

    The kernels write float32 [rows, heads] in base 2 (``kernel``); a caller's
    ``lse`` in that form is written in place, another layout or base is
    finished after the launch (``finish``), as FlashInfer's own wrappers do.
    """

    def __init__(self, torch, lse, return_lse, rows, heads, device, lse_base="log2", lse_layout="NH"):
        if lse_base not in LSE_BASES:
            raise invalid_argument(f"lse_base={lse_base!r} is not allowed; allowed: " + ", ".join(map(repr, LSE_BASES)))
        if lse_layout not in LSE_LAYOUTS:
            raise invalid_argument(f"lse_layout={lse_layout!r} is not allowed; allowed: "
                                   + ", ".join(map(repr, LSE_LAYOUTS)))
        self.return_lse = bool(flag("return_lse", return_lse))
        self.base, self.layout = lse_base, lse_layout
        self.caller = None
        if lse_layout == "HN" and self.return_lse:
            if lse is not None:
                self.caller = output(torch, "lse", lse, (heads, rows), torch.float32, device)
                if not lse.is_contiguous():
                    raise invalid_argument('lse: a non-contiguous tensor is not allowed with lse_layout="HN"; '
                                           "allowed: a contiguous [num_qo_heads, rows] tensor")
            self.kernel = torch.empty((rows, heads), dtype=torch.float32, device=device)
        elif lse is not None or self.return_lse:
            self.kernel = output(torch, "lse", lse, (rows, heads), torch.float32, device)
        else:
            self.kernel = None

    def finish(self, torch, out):
        """What run() returns: out, or (out, lse) in the asked base and layout."""
        if not self.return_lse:
            return out
        lse = self.kernel
        if self.layout == "HN":
            target = self.caller if self.caller is not None else torch.empty(
                (lse.shape[1], lse.shape[0]), dtype=lse.dtype, device=lse.device)
            if self.base == "ln":
                torch.mul(lse.t(), LN2, out=target)
            else:
                target.copy_(lse.t())
            return out, target
        if self.base == "ln":
            lse.mul_(LN2)
        return out, lse


def fp8_prefill(torch, q, k, v, scales, o_dtype, head_dim, backend, pos_encoding_mode, logits_soft_cap, variant):
    """single_prefill_with_kv_cache's fp8 arguments, as the C side checks them (so a refusal needs no GPU):
    float8_e4m3fn q, k and v, o_dtype float16 / bfloat16, per-head float32 scales ([num_qo_heads] for scale_q,
    [num_kv_heads] for scale_k / scale_v), head_dim 128, backend 'auto' / 'fa3_ws', no RoPE / ALiBi, soft cap
    or variant. With a 16-bit q the scale tensors are UNSUPPORTED."""
    e4m3 = getattr(torch, "float8_e4m3fn", None)
    e5m2 = getattr(torch, "float8_e5m2", None)
    if q.dtype == e5m2:
        raise unsupported("q.dtype=torch.float8_e5m2 is not supported; allowed: torch.float16, torch.bfloat16, "
                          "torch.float8_e4m3fn (with float8_e4m3fn k and v)")
    if q.dtype != e4m3:
        for name, value in scales.items():
            if value is not None:
                raise unsupported(f"{name}={short(value)} is not supported with q.dtype={q.dtype}: per-head scales "
                                  "dequantize float8_e4m3fn q, k and v; allowed: None")
        return
    fp8 = "with q.dtype=torch.float8_e4m3fn (the warp-specialized Hopper kernel)"
    for name, t in (("k", k), ("v", v)):
        if t.dtype != e4m3:
            raise unsupported(f"{name}.dtype={t.dtype} is not supported {fp8}; allowed: torch.float8_e4m3fn")
    if o_dtype not in (torch.float16, torch.bfloat16):
        shown = "None (q's dtype, torch.float8_e4m3fn)" if o_dtype is None or o_dtype == q.dtype else str(o_dtype)
        raise unsupported(f"o_dtype={shown} is not supported {fp8}: an fp8 output is not written; allowed: "
                          "torch.float16, torch.bfloat16")
    if head_dim != 128:
        raise unsupported(f"head_dim={head_dim} is not supported {fp8}; allowed: 128")
    if backend not in ("auto", "fa3_ws"):
        raise unsupported(f"backend={backend!r} is not supported {fp8}; allowed: 'auto', 'fa3_ws' (sm_90a)")
    if pos_encoding_mode != "NONE":
        raise unsupported(f"pos_encoding_mode={pos_encoding_mode!r} is not supported {fp8}; allowed: 'NONE'")
    if logits_soft_cap not in (None, 0, 0.0):
        raise unsupported(f"logits_soft_cap={logits_soft_cap!r} is not supported {fp8}; allowed: None or 0")
    if variant is not None:
        raise unsupported(f"variant={short(variant)} is not supported {fp8}; allowed: None")
    heads = {"scale_q": q.shape[1], "scale_k": k.shape[1], "scale_v": v.shape[1]}
    for name, value in scales.items():
        if value is None:
            continue
        tensor(torch, name, value)
        if value.dtype != torch.float32:
            raise invalid_argument(f"{name}: dtype {value.dtype} is not allowed; allowed: torch.float32")
        if tuple(value.shape) != (heads[name],):
            raise invalid_argument(f"{name}: shape {list(value.shape)} is not allowed; allowed: [{heads[name]}] "
                                   f"({'num_qo_heads' if name == 'scale_q' else 'num_kv_heads'})")

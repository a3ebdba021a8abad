"""single_prefill_with_kv_cache(_return_lse) with FlashInfer 0.7.2's signature, over the C API, and the prefill
options the batch prefill wrappers share."""

import ctypes
import functools
import math

from . import _args as checks
from . import _ctypes_types as c_types
from . import _runtime
from ._dlpack import Borrowed, require_torch
from ._library import check, lib
from ._streams import current_stream
from ._variant import variant_handle
from .errors import invalid_argument


def prefill_options(causal, kv_layout, pos_encoding_mode, window_left, logits_soft_cap, sm_scale, rope_scale,
                    rope_theta, backend, variant=None, o_dtype=None):
    """attnjit_prefill_options_t from FlashInfer's arguments (use_fp16_qk_reduction is checked by the caller), an
    attnjit.Variant or None (the caller keeps it alive for the call), and the output's DLDataType (o_dtype_code)
    or None (q's)."""
    options = c_types.PrefillOptions()
    lib().attnjit_prefill_options_init_sized(ctypes.byref(options), ctypes.sizeof(options))
    options.causal = checks.flag("causal", causal)
    options.kv_layout = checks.kv_layout(kv_layout)
    options.pos_encoding_mode = checks.pos_encoding(pos_encoding_mode)
    options.window_left = checks.window(window_left)
    checks.set_score_options(options, logits_soft_cap, sm_scale, rope_scale, rope_theta)
    options.backend = checks.prefill_backend(backend)
    options.variant = variant_handle(variant)
    if o_dtype is not None:
        options.o_dtype = o_dtype
    return options


def _is_e4m3(torch, dtype):
    return dtype == getattr(torch, "float8_e4m3fn", None)


def _packed_mask(torch, custom_mask, packed_custom_mask, qo_len, kv_len, device):
    """The packed mask as a uint8 tensor on q's device (packed_custom_mask wins, as in FlashInfer)."""
    if packed_custom_mask is not None:
        checks.tensor(torch, "packed_custom_mask", packed_custom_mask)
        if packed_custom_mask.dtype != torch.uint8:
            raise invalid_argument(f"packed_custom_mask: dtype {packed_custom_mask.dtype} is not allowed; "
                                   "allowed: torch.uint8 (bit-packed, little-endian within a byte)")
        return packed_custom_mask.contiguous()
    if custom_mask is None:
        return None
    checks.tensor(torch, "custom_mask", custom_mask)
    if custom_mask.numel() != qo_len * kv_len:
        raise invalid_argument(f"custom_mask: {custom_mask.numel()} elements is not allowed; allowed: qo_len * kv_len "
                               f"= {qo_len * kv_len}")
    import numpy as np

    bits = np.packbits(custom_mask.reshape(-1).to(torch.bool).cpu().numpy(), bitorder="little")
    return torch.from_numpy(bits).to(device)


def single_prefill_with_kv_cache(q, k, v, scale_q=None, scale_k=None, scale_v=None, o_dtype=None, custom_mask=None,
                                 packed_custom_mask=None, causal=False, kv_layout="NHD", pos_encoding_mode="NONE",
                                 use_fp16_qk_reduction=False, sm_scale=None, window_left=-1, logits_soft_cap=None,
                                 rope_scale=None, rope_theta=None, backend="auto", return_lse=False, kv_cache_sf=None,
                                 k_scale=None, v_scale=None, *, variant=None):
    """Prefill / append attention of one request, as flashinfer.prefill.single_prefill_with_kv_cache.

    q [qo_len, num_qo_heads, head_dim]; k, v [kv_len, num_kv_heads, head_dim]
    (NHD) or [num_kv_heads, kv_len, head_dim] (HND). causal aligns the queries
    to the end of the KV. k_scale multiplies the softmax scale and v_scale the
    output, as in FlashInfer. fp8 attention (FlashInfer's): q, k and v
    float8_e4m3fn with scale_q [num_qo_heads], scale_k / scale_v
    [num_kv_heads] float32 per-head scales (None: ones) and o_dtype
    torch.float16 or torch.bfloat16 (None is q's dtype, an fp8 output, which
    is UNSUPPORTED): the warp-specialized Hopper kernel (sm_90a, head_dim 128,
    backend 'auto' or 'fa3_ws'; no RoPE, ALiBi, soft cap or variant). With
    16-bit q, o_dtype must be q's and the scale tensors None. kv_cache_sf
    (NVFP4) is UNSUPPORTED.
    Returns o [qo_len, num_qo_heads, head_dim], or (o, lse) with lse float32
    [qo_len, num_qo_heads] in base 2. Runs on torch's current stream of q's
    device; records into a CUDA graph (the plan compiles on the first call, so
    make one before capturing). Raises AttnjitError.

    variant (an attnjit extension, keyword-only): an attnjit.Variant whose
    score_mod / mask_mod is compiled into the kernel; a mask_mod is refused
    with causal=True or a custom mask, and by backend='fa3_ws'.
    """
    torch = require_torch()
    for name, value in (("q", q), ("k", k), ("v", v)):
        checks.tensor(torch, name, value)
    checks.refuse_if_given(kv_cache_sf=kv_cache_sf)
    # FlashInfer's default output dtype is q's (for fp8 q an fp8 output, which is refused naming o_dtype).
    out_dtype = q.dtype if o_dtype is None else checks.dtype_of(torch, "o_dtype", o_dtype)
    kv_layout_heads = 1 if kv_layout == "NHD" else 0
    checks.fp8_prefill(torch, q, k.transpose(0, 1) if kv_layout_heads == 0 else k,
                       v.transpose(0, 1) if kv_layout_heads == 0 else v,
                       {"scale_q": scale_q, "scale_k": scale_k, "scale_v": scale_v},
                       None if o_dtype is None else out_dtype, q.shape[-1], backend, pos_encoding_mode,
                       logits_soft_cap, variant)
    if out_dtype != q.dtype and not _is_e4m3(torch, q.dtype):
        raise checks.unsupported(f"o_dtype={o_dtype} is not supported with q.dtype={q.dtype}: attnjit writes a "
                                 f"16-bit query's output in its dtype; allowed: None or {q.dtype} (another output "
                                 "dtype only with float8_e4m3fn q)")
    checks.use_fp16_qk_reduction(use_fp16_qk_reduction)
    k_scale, v_scale = checks.scale(torch, "k_scale", k_scale), checks.scale(torch, "v_scale", v_scale)
    if k_scale is not None:
        sm_scale = (1.0 / math.sqrt(q.shape[-1]) if sm_scale is None
                    else checks.finite_float("sm_scale", sm_scale)) * k_scale
    options = prefill_options(causal, kv_layout, pos_encoding_mode, window_left, logits_soft_cap, sm_scale,
                              rope_scale, rope_theta, backend, variant,
                              checks.o_dtype_code(torch, "o_dtype", out_dtype, q.dtype))
    return_lse = bool(checks.flag("return_lse", return_lse))
    kv_len = k.shape[0] if kv_layout == "NHD" else k.shape[1]
    mask = _packed_mask(torch, custom_mask, packed_custom_mask, q.shape[0], kv_len, q.device)
    o = torch.empty(q.shape, dtype=out_dtype, device=q.device)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device) if return_lse else None
    with Borrowed() as borrowed, current_stream(torch, q.device) as stream:
        tq, tk, tv = borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v")
        options.scale_q, options.scale_k, options.scale_v = (
            borrowed.optional(value, name) for name, value in (("scale_q", scale_q), ("scale_k", scale_k),
                                                               ("scale_v", scale_v)))
        # A split plan's partial states go in a workspace from torch's allocator: stream-ordered, and taken
        # from the graph's pool while capturing, so this call records into a CUDA graph as FlashInfer's does.
        need = ctypes.c_size_t(0)
        check(lib().attnjit_single_prefill_workspace_bytes(_runtime.handle(), tq, tk, tv, ctypes.byref(options),
                                                           int(return_lse), int(mask is not None), ctypes.byref(need)))
        ws = torch.empty(need.value, dtype=torch.uint8, device=q.device) if need.value else None
        check(lib().attnjit_single_prefill_with_kv_cache(
            _runtime.handle(), tq, tk, tv, borrowed.tensor(o, "o"), borrowed.optional(lse, "lse"),
            ctypes.byref(options), None if mask is None else ctypes.c_void_p(mask.data_ptr()),
            0 if mask is None else mask.numel(), None if ws is None else ctypes.c_void_p(ws.data_ptr()), need.value,
            stream))
    if v_scale is not None and v_scale != 1.0:
        o.mul_(v_scale)
    return (o, lse) if return_lse else o


single_prefill_with_kv_cache_return_lse = functools.partial(single_prefill_with_kv_cache, return_lse=True)

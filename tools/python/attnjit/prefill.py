"""single_prefill_with_kv_cache(_return_lse) with FlashInfer's signature, over the C API."""

import ctypes

from . import _ctypes_types as T
from . import _runtime
from ._dlpack import Borrowed
from ._library import check, lib
from .decode import _KV_LAYOUTS, _POS_ENCODINGS, _float
from .errors import invalid_argument


_BACKENDS = {"auto": 0, "fa2": 1, "fa3": 2}  # attnjit_prefill_backend_t


def _options(causal, kv_layout, pos_encoding_mode, allow_fp16_qk_reduction, window_left, logits_soft_cap, sm_scale,
             rope_scale, rope_theta, backend):
    if backend not in _BACKENDS:
        raise invalid_argument(f"backend={backend!r} is not a backend; allowed: 'auto', 'fa2', 'fa3'")
    if kv_layout not in _KV_LAYOUTS:
        raise invalid_argument(f"kv_layout={kv_layout!r} is not a KV layout; allowed: NHD, HND")
    if pos_encoding_mode not in _POS_ENCODINGS:
        raise invalid_argument(f"pos_encoding_mode={pos_encoding_mode!r} is not a positional encoding; "
                               "allowed: NONE, ROPE_LLAMA, ALIBI")
    if isinstance(window_left, bool) or not isinstance(window_left, int) or not -1 <= window_left < 2**31:
        raise invalid_argument(f"window_left={window_left!r} is not allowed; allowed: -1 (whole sequence) "
                               "or an int >= 0")
    o = T.PrefillOptions()
    lib().attnjit_prefill_options_init(ctypes.byref(o))
    o.causal = 1 if causal else 0
    o.kv_layout = _KV_LAYOUTS[kv_layout]
    o.pos_encoding_mode = _POS_ENCODINGS[pos_encoding_mode]
    o.allow_fp16_qk_reduction = 1 if allow_fp16_qk_reduction else 0  # accepted; fp32 accumulation regardless
    o.window_left = window_left
    o.logits_soft_cap = _float("logits_soft_cap", logits_soft_cap, zero_allowed=True)  # 0: no capping
    o.sm_scale = _float("sm_scale", sm_scale)
    o.rope_scale = _float("rope_scale", rope_scale)
    o.rope_theta = _float("rope_theta", rope_theta)
    o.backend = _BACKENDS[backend]
    return o


def _packed_mask(custom_mask, packed_custom_mask, qo_len, kv_len, device):
    """The packed mask as a uint8 tensor on q's device (packed_custom_mask wins, as in FlashInfer)."""
    import torch

    if packed_custom_mask is not None:
        if packed_custom_mask.dtype != torch.uint8:
            raise invalid_argument(f"packed_custom_mask: dtype {packed_custom_mask.dtype} is not allowed; "
                                   "allowed: torch.uint8 (bit-packed, little-endian within a byte)")
        return packed_custom_mask.contiguous()
    if custom_mask is None:
        return None
    if custom_mask.numel() != qo_len * kv_len:
        raise invalid_argument(f"custom_mask: {custom_mask.numel()} elements is not allowed; it must have "
                               f"qo_len * kv_len = {qo_len * kv_len}")
    import numpy as np

    bits = np.packbits(custom_mask.reshape(-1).to(torch.bool).cpu().numpy(), bitorder="little")
    return torch.from_numpy(bits).to(device)


def single_prefill_with_kv_cache(q, k, v, custom_mask=None, packed_custom_mask=None, causal=False, kv_layout="NHD",
                                 pos_encoding_mode="NONE", allow_fp16_qk_reduction=False, sm_scale=None,
                                 window_left=-1, logits_soft_cap=None, rope_scale=None, rope_theta=None,
                                 return_lse=False, backend="auto"):
    """Prefill / append attention of one request, as flashinfer.prefill.single_prefill_with_kv_cache.

    q [qo_len, num_qo_heads, head_dim]; k, v [kv_len, num_kv_heads, head_dim]
    (NHD) or [num_kv_heads, kv_len, head_dim] (HND). causal aligns the queries
    to the end of the KV. Returns o [qo_len, num_qo_heads, head_dim], or
    (o, lse) with lse float32 [qo_len, num_qo_heads] in base 2. Runs on
    torch's current stream of q's device; records into a CUDA graph (the
    plan compiles on the first call, so make one before capturing). Raises
    AttnjitError.
    """
    import torch

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise invalid_argument(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    options = _options(causal, kv_layout, pos_encoding_mode, allow_fp16_qk_reduction, window_left, logits_soft_cap,
                       sm_scale, rope_scale, rope_theta, backend)
    kv_len = k.shape[0] if kv_layout == "NHD" else k.shape[1]
    mask = _packed_mask(custom_mask, packed_custom_mask, q.shape[0], kv_len, q.device)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device) if return_lse else None
    with Borrowed() as borrowed, torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        tq, tk, tv = borrowed.tensor(q, "q"), borrowed.tensor(k, "k"), borrowed.tensor(v, "v")
        # A split plan's partial states go in a workspace from torch's
        # allocator: stream-ordered, and taken from the graph's pool while
        # capturing, so this call records into a CUDA graph as FlashInfer's does.
        need = ctypes.c_size_t(0)
        check(lib().attnjit_single_prefill_workspace_bytes(_runtime.handle(), tq, tk, tv, ctypes.byref(options),
                                                           int(return_lse), int(mask is not None), ctypes.byref(need)))
        ws = torch.empty(need.value, dtype=torch.uint8, device=q.device) if need.value else None
        check(lib().attnjit_single_prefill_with_kv_cache(
            _runtime.handle(), tq, tk, tv, borrowed.tensor(o, "o"), borrowed.optional(lse, "lse"),
            ctypes.byref(options), None if mask is None else mask.data_ptr(), 0 if mask is None else mask.numel(),
            None if ws is None else ws.data_ptr(), need.value, stream))
    return (o, lse) if return_lse else o


def single_prefill_with_kv_cache_return_lse(q, k, v, **kwargs):
    """single_prefill_with_kv_cache(..., return_lse=True): (o, lse)."""
    kwargs["return_lse"] = True
    return single_prefill_with_kv_cache(q, k, v, **kwargs)

"""Checks of what transformers' model code hands an attention function, before any GPU work: what attnjit
cannot serve is an AttnjitError naming the argument (UNSUPPORTED for what sdpa/eager compute and attnjit
does not, INVALID_ARGUMENT for a malformed value); nothing falls back to another backend."""

import math

from ..._args import short, unsupported
from ...errors import invalid_argument

HALF_DTYPES = ("float16", "bfloat16")

# Model kwargs that change what attention computes, which attnjit does not (None / False is fine).
_REFUSED_KWARGS = {
    "position_bias": "an additive position bias (T5-style)",
    "s_aux": "attention sinks (gpt-oss)",
    "sinks": "attention sinks",
    "head_mask": "a per-head output mask",
}


def tensors(torch, query, key, value, layout):
    """query [batch, q_heads, q_len, head_dim] and key/value [batch, kv_heads, kv_len, head_dim] (layout names
    the shapes in messages): CUDA, float16/bfloat16, one dtype and device, heads a multiple of kv heads."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise invalid_argument(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise invalid_argument(f"{name}: shape {list(t.shape)} is not allowed; allowed: 4-D {layout}")
    if str(query.dtype).replace("torch.", "") not in HALF_DTYPES:
        raise unsupported(f"query: dtype {query.dtype} is not supported: attnjit's kernels compute in float16 and "
                          "bfloat16; allowed: torch.float16, torch.bfloat16 (load the model with "
                          "dtype=torch.bfloat16 or torch.float16)")
    for name, t in (("key", key), ("value", value)):
        if t.dtype != query.dtype:
            raise invalid_argument(f"{name}: dtype {t.dtype} is not allowed; allowed: {query.dtype} (the query's)")
    grad(torch, query)
    d = query.shape[-1]
    if key.shape[-1] != d or value.shape[-1] != d:
        raise unsupported(f"value: head_dim {value.shape[-1]} (key {key.shape[-1]}) is not supported with query "
                          f"head_dim {d}: attnjit's kernels take one head_dim for Q, K and V; allowed: {d}")
    if key.shape[:3] != value.shape[:3]:
        raise invalid_argument(f"value: shape {list(value.shape)} is not allowed; allowed: key's "
                               f"{list(key.shape[:3])} + [head_dim]")
    if query.shape[1] % key.shape[1]:
        raise invalid_argument(f"key: {key.shape[1]} heads is not allowed with {query.shape[1]} query heads; "
                               "allowed: a divisor of the query heads (GQA)")
    if not query.is_cuda:
        raise invalid_argument(f"query: device {query.device} is not allowed; allowed: a CUDA tensor (move the "
                               "model to the GPU)")
    for name, t in (("key", key), ("value", value)):
        if t.device != query.device:
            raise invalid_argument(f"{name}: device {t.device} is not allowed; allowed: {query.device} (the "
                                   "query's)")


def not_compiling(torch):
    """torch.compile cannot trace attnjit's host-side planning (ctypes calls, host reads of the tables)."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling():
        raise unsupported("torch.compile of a model on attnjit is not supported: attnjit plans each step on the "
                          "host; allowed: eager execution (no torch.compile, ContinuousBatchingConfig("
                          "default_compile_level=0))")


def model_kwargs(kwargs):
    """Refuses the model kwargs attnjit does not compute (_REFUSED_KWARGS, output_attentions=True)."""
    for name, what in _REFUSED_KWARGS.items():
        if kwargs.get(name) is not None:
            raise unsupported(f"{name}={short(kwargs[name])} is not supported: {what}; allowed: None")
    if kwargs.get("output_attentions"):
        raise unsupported("output_attentions=True is not supported: attnjit never forms the attention weights; "
                          "allowed: False (use attn_implementation='eager' to read them)")


def grad(torch, query):
    if query.requires_grad and torch.is_grad_enabled():
        raise unsupported("query.requires_grad=True is not supported: attnjit computes attention without a "
                          "backward pass; allowed: inference (torch.no_grad() / torch.inference_mode())")


def options(dropout, scaling, sliding_window, softcap, head_dim, kwargs):
    """(sm_scale, window or None, soft cap or None) from the attention call's options; refuses dropout and
    the model kwargs attnjit does not compute (_REFUSED_KWARGS, output_attentions=True)."""
    if dropout is None or not isinstance(dropout, (int, float)) or dropout != 0:
        raise unsupported(f"dropout={short(dropout)} is not supported: attnjit computes inference attention; "
                          "allowed: 0.0 (model.eval())")
    model_kwargs(kwargs)
    if scaling is None:
        scaling = 1.0 / math.sqrt(head_dim)
    elif isinstance(scaling, bool) or not isinstance(scaling, (int, float)) or not math.isfinite(scaling) \
            or scaling <= 0:
        raise invalid_argument(f"scaling={short(scaling)} is not allowed; allowed: None or a finite float > 0")
    if sliding_window is not None and (isinstance(sliding_window, bool) or not isinstance(sliding_window, int)
                                       or sliding_window < 1):
        raise invalid_argument(f"sliding_window={short(sliding_window)} is not allowed; allowed: None or an int "
                               ">= 1 (a row sees that many keys, itself included)")
    if softcap is not None:
        if isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or not math.isfinite(softcap) \
                or softcap < 0:
            raise invalid_argument(f"softcap={short(softcap)} is not allowed; allowed: None or a float > 0")
        softcap = float(softcap) or None
    return float(scaling), sliding_window, softcap

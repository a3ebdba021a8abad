"""FlashInfer's attention-state merges (flashinfer.cascade.merge_state,
merge_state_in_place, merge_states) over the C API (attnjit_merge_state.h).

A state is an attention output V over a range of keys and its log-sum-exp S
in base 2; merging the states of disjoint ranges gives the state of their
union: S = log2(2^S_a + 2^S_b), V = (2^S_a V_a + 2^S_b V_b) / 2^S.

V is float16 or bfloat16 with head_dim 64, 128 or 256, S float32, all CUDA
tensors on one device; each call is one launch on torch's current stream.
Outputs are allocated with torch. The library checks shapes, dtypes, strides
and devices and names the argument at fault; a and b (v and v_other) must
have equal strides, which tensors of one shape made by torch do.
"""

from . import _args as checks
from . import _runtime
from ._dlpack import Borrowed, require_torch
from ._library import check, lib
from ._streams import current_stream
from .errors import invalid_argument


def _tensors(torch, **tensors):
    for name, t in tensors.items():
        checks.tensor(torch, name, t)


_STATE = "[seq_len, num_heads, head_dim]"
_STACKED = "[seq_len, num_states, num_heads, head_dim]"


def _rank(name, v, ndim, allowed):
    """V's rank, which the outputs' shapes are taken from (the library checks everything else)."""
    if v.dim() != ndim:
        raise invalid_argument(f"{name}: shape {list(v.shape)} is not allowed; allowed: {allowed}")


def _on_cuda(torch, **tensors):
    """After the checks that need no device: each tensor given is a CUDA tensor."""
    for name, t in tensors.items():
        if t is not None:
            checks.cuda_tensor(torch, name, t)


def _outputs(torch, v, state_shape):
    """V [seq_len, num_heads, head_dim] in v's dtype and S [seq_len, num_heads] float32, contiguous."""
    v_merged = torch.empty(state_shape + (v.shape[-1],), dtype=v.dtype, device=v.device)
    s_merged = torch.empty(state_shape, dtype=torch.float32, device=v.device)
    return v_merged, s_merged


def merge_state(v_a, s_a, v_b, s_b):
    """Merges (v_a, s_a) and (v_b, s_b), the states of two disjoint KV segments: v [seq_len, num_heads,
    head_dim], s [seq_len, num_heads] float32. Returns (V, S) of the merged segment [A: B]."""
    torch = require_torch()
    _tensors(torch, v_a=v_a, s_a=s_a, v_b=v_b, s_b=s_b)
    _rank("v_a", v_a, 3, _STATE)
    _on_cuda(torch, v_a=v_a, s_a=s_a, v_b=v_b, s_b=s_b)
    v_merged, s_merged = _outputs(torch, v_a, tuple(v_a.shape[:2]))
    with Borrowed() as borrowed, current_stream(torch, v_a.device) as stream:
        check(lib().attnjit_merge_state(
            _runtime.handle(), borrowed.tensor(v_a, "v_a"), borrowed.tensor(s_a, "s_a"), borrowed.tensor(v_b, "v_b"),
            borrowed.tensor(s_b, "s_b"), borrowed.tensor(v_merged, "v_merged"),
            borrowed.tensor(s_merged, "s_merged"), stream))
    return v_merged, s_merged


def merge_state_in_place(v, s, v_other, s_other, mask=None):
    """Merges (v_other, s_other) into (v, s) in place: v [seq_len, num_heads, head_dim] (contiguous rows),
    s [seq_len, num_heads] float32 (contiguous). mask: None to merge every position, or a bool (or uint8)
    CUDA tensor [seq_len] whose False entries leave that position as it is. Returns None."""
    torch = require_torch()
    _tensors(torch, v=v, s=s, v_other=v_other, s_other=s_other)
    _rank("v", v, 3, _STATE)
    if mask is not None:
        checks.tensor(torch, "mask", mask)
        if mask.dtype not in (torch.bool, torch.uint8, torch.int8):
            raise invalid_argument(f"mask: dtype {mask.dtype} is not allowed; allowed: torch.bool (or uint8, int8: "
                                   "nonzero means merge)")
        if mask.dim() != 1 or mask.shape[0] != v.shape[0]:
            raise invalid_argument(f"mask: shape {list(mask.shape)} is not allowed; allowed: [seq_len] with "
                                   f"seq_len={v.shape[0]} from v")
    _on_cuda(torch, v=v, s=s, v_other=v_other, s_other=s_other, mask=mask)
    with Borrowed() as borrowed, current_stream(torch, v.device) as stream:
        check(lib().attnjit_merge_state_in_place(
            _runtime.handle(), borrowed.tensor(v, "v"), borrowed.tensor(s, "s"), borrowed.tensor(v_other, "v_other"),
            borrowed.tensor(s_other, "s_other"), borrowed.optional(mask, "mask"), stream))


def merge_states(v, s):
    """Merges num_states states per position: v [seq_len, num_states, num_heads, head_dim], s [seq_len,
    num_states, num_heads] float32. Returns (V [seq_len, num_heads, head_dim], S [seq_len, num_heads])."""
    torch = require_torch()
    _tensors(torch, v=v, s=s)
    _rank("v", v, 4, _STACKED)
    _on_cuda(torch, v=v, s=s)
    v_merged, s_merged = _outputs(torch, v, (v.shape[0], v.shape[2]))
    with Borrowed() as borrowed, current_stream(torch, v.device) as stream:
        check(lib().attnjit_merge_states(
            _runtime.handle(), borrowed.tensor(v, "v"), borrowed.tensor(s, "s"),
            borrowed.tensor(v_merged, "v_merged"), borrowed.tensor(s_merged, "s_merged"), stream))
    return v_merged, s_merged

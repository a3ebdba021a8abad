"""What a transformers attention mask asks of each request, in the form attnjit's kernels take.

transformers hands the attention function a 4-D mask ([batch, 1, q_len, kv_len], bool "keep" or additive
float with 0 / -inf) or None. Most masks are left padding + causal (+ sliding window): request i sees keys
[start_i, end), its query rows aligned to end (row j sits at position end - q_len + j), which attnjit plans
as a page table over the keys in place. Anything else keeps the mask itself (FlashInfer's custom mask over
all kv_len keys). The mask is compared with the structured form on the device (one host sync per mask, not
per layer: the result is kept while the same mask tensor comes back unchanged). That is the prefill's reading;
a decode step's mask is not analysed at all but read by the kernel (_decode_mask.py).
"""

import weakref

from ..._args import short, unsupported
from ...errors import invalid_argument


class KeyRanges:
    """starts[i] (host ints), end: request i's keys; causal: rows see keys up to their own position;
    window: transformers' sliding_window (a row sees the `window` keys up to itself) or None; custom: a
    bool [batch, q_len, kv_len] device tensor that replaces all of it (starts 0, end kv_len)."""

    __slots__ = ("starts", "end", "causal", "window", "custom")

    def __init__(self, starts, end, causal, window, custom=None):
        self.starts, self.end, self.causal, self.window, self.custom = tuple(starts), end, causal, window, custom

    def key(self):
        """What a plan depends on (the custom mask by identity: the caller keeps it alive with the plan)."""
        return (self.starts, self.end, self.causal, self.window, None if self.custom is None else id(self.custom))


def check_mask(torch, mask, batch, q_len, kv_len, device=None):
    """The host checks of a mask against the call (type, shape, dtype; device unless None); reads nothing on the
    device."""
    if not isinstance(mask, torch.Tensor):
        raise unsupported(f"attention_mask={short(mask)} is not supported; allowed: None or a 4-D torch.Tensor "
                          "(transformers' sdpa/eager masks; a flex BlockMask is flex_attention's)")
    want = f"[{batch} or 1, 1, {q_len}, {kv_len}]"
    if mask.dim() != 4 or mask.shape[0] not in (1, batch) or mask.shape[2] != q_len or mask.shape[3] != kv_len:
        raise invalid_argument(f"attention_mask: shape {list(mask.shape)} is not allowed; allowed: {want} "
                               "(batch, heads, query length, key length of this call)")
    if mask.shape[1] != 1:
        raise unsupported(f"attention_mask: shape {list(mask.shape)} (one mask per head) is not supported; "
                          f"allowed: {want}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise invalid_argument(f"attention_mask: dtype {mask.dtype} is not allowed; allowed: torch.bool or a "
                               "float dtype (0 keeps a key, -inf drops it)")
    if device is not None and mask.device != device:
        raise invalid_argument(f"attention_mask: device {mask.device} is not allowed; allowed: {device} (the "
                               "query's)")


def keep_of(torch, mask):
    """A checked mask (check_mask) as bool (True: the key takes part), same shape. A float mask's values are
    read on the device for the check below: one host sync (transformers' "attnjit" masks are bool)."""
    if mask.dtype == torch.bool:
        return mask
    keep = mask == 0
    # An additive mask of 0 / "minus infinity" only: other values are biases (ALiBi, T5), not a mask.
    bias = ~keep & (mask > torch.finfo(mask.dtype).min / 2)
    if bool(bias.any()):
        raise unsupported("attention_mask: an additive float mask with values other than 0 and -inf (or the "
                          "dtype's minimum) is a bias, which attnjit does not add; allowed: a bool mask or "
                          "0 / -inf")
    return keep


def keep_mask(torch, mask, batch, q_len, kv_len):
    """The mask as bool [batch, q_len, kv_len] (True: the key takes part), checked against the call's shapes."""
    check_mask(torch, mask, batch, q_len, kv_len)
    return keep_of(torch, mask)[:, 0].expand(batch, q_len, kv_len)


def structured(torch, keep, causal, window):
    """KeyRanges for a keep mask that is left padding + causal (+ window), or one holding the mask itself."""
    batch, q_len, kv_len = keep.shape
    seen = keep.any(dim=1)  # [batch, kv_len]: keys some row of the request sees
    first = seen.to(torch.int32).argmax(dim=1)
    end = kv_len - seen.flip(1).to(torch.int32).argmax(dim=1)  # one past each request's last key
    common_end = end.max()
    k = torch.arange(kv_len, device=keep.device)
    row = common_end - q_len + torch.arange(q_len, device=keep.device)  # each query row's position
    expect = (k[None, None, :] >= first[:, None, None]) & (k[None, None, :] < common_end)
    if causal:
        expect = expect & (k[None, :] <= row[:, None])[None]
    if window is not None:
        expect = expect & (row[:, None] - k[None, :] < window)[None]
    matches = (expect == keep).all() & seen.any(dim=1).all()
    facts = torch.cat([matches.view(1).to(torch.int64), common_end.view(1).to(torch.int64),
                       first.to(torch.int64)]).tolist()  # the one host sync
    if facts[0]:
        return KeyRanges(facts[2:], facts[1], causal, window)
    return KeyRanges([0] * batch, kv_len, False, None, custom=keep.contiguous())


# Analyses of the masks seen last, by identity; a weak reference tells a live mask from a new one at the
# same address, and _version tells one written in place.
_SEEN = {}
_SEEN_MAX = 8


def key_ranges(torch, mask, batch, q_len, kv_len, causal, window):
    """KeyRanges for one attention call (see the module's docstring)."""
    if mask is None:
        # sdpa's reading of no mask: is_causal (top-left aligned) when q_len > 1, else every key.
        if causal and q_len > 1:
            return KeyRanges([0] * batch, q_len, True, window)
        return KeyRanges([0] * batch, kv_len, False, window)
    signature = (batch, q_len, kv_len, causal, window)
    hit = _SEEN.get(id(mask))
    if hit is not None and hit[0]() is mask and hit[1] == mask._version and hit[2] == signature:
        return hit[3]
    ranges = structured(torch, keep_mask(torch, mask, batch, q_len, kv_len), causal, window)
    if len(_SEEN) >= _SEEN_MAX:
        _SEEN.pop(next(iter(_SEEN)))
    _SEEN[id(mask)] = (weakref.ref(mask), mask._version, signature, ranges)
    return ranges

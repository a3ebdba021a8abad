"""A decode step's attention mask, asked by the kernel: no analysis of it and no host read.

transformers hands every decode step a new mask ([batch or 1, 1, 1, kv_len]) beside K/V one key longer. Reading
it as key ranges (_mask.structured) costs a dozen small torch ops and a host sync per step; instead the decode
plan covers each request's kv_len keys (_decode_steps.py: its table does not depend on the mask) and a user
variant's mask_mod reads keep[request, key], a uint8 [batch, kv_len] view of the mask. Plans read a variant's bound values at each
run, so a step's new mask is a bind, not a new plan; the layers of a step share one mask object, so the bind
happens once per step and layer kind.
"""

from ..._variant import Variant
from . import _mask, _plans

MASK_MOD = "return p.keep_at(b, kv) != 0;"


def keep_view(torch, mask, batch):
    """A decode mask that passed _mask.check_mask as the uint8 [batch, kv_len] the mask_mod reads: a bool mask's
    view (no copy; a batch-1 mask broadcast with stride 0), a float mask's (mask == 0) after _mask.keep_of has
    refused a bias (a host sync: transformers' "attnjit" masks are bool)."""
    keep = _mask.keep_of(torch, mask)[:, 0, 0, :].view(torch.uint8)
    return keep.expand(batch, keep.shape[-1])


class MaskBinding:
    """One decode plan's variant and the mask its `keep` is bound to. The variant holds the bound view (and so
    the mask's memory) until the next bind, and the wrapper planned with it holds the variant."""

    __slots__ = ("variant", "_bound", "_version")

    def __init__(self, torch, mask, batch):
        self.variant = Variant(mask_mod=MASK_MOD, params={"keep": keep_view(torch, mask, batch)})
        self._bound, self._version = mask, mask._version
        _plans.masks_bound["decode"] += 1

    def bind(self, torch, mask, batch):
        """Points the variant at `mask`, unless it is the mask bound last and unwritten since (a float mask's
        keep is a copy: a write must reach it)."""
        if mask is self._bound and mask._version == self._version:
            return
        self.variant.bind(keep=keep_view(torch, mask, batch))
        self._bound, self._version = mask, mask._version
        _plans.masks_bound["decode"] += 1

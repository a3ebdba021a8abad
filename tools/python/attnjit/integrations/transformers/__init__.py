"""attnjit as a Hugging Face transformers attention backend.

    import attnjit.integrations.transformers          # registers on import (register() is idempotent)
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16, attn_implementation="attnjit")
    model.set_attn_implementation("attnjit")          # or switch a loaded model
    model.set_attn_implementation("paged|attnjit")    # continuous batching (generate_batch)

"attnjit" serves standard forwards and generate() (prefill through batch prefill, one-token steps through
batch decode, a decode step's mask asked in the kernel, one decode plan serving step after step while the
cache grows); "paged|attnjit" serves continuous batching. Both compute what sdpa computes from the same
inputs (left padding, causal, sliding window, soft cap, GQA, `scaling`) in float16 / bfloat16, and refuse
what they cannot with an AttnjitError naming the argument (never another backend in their place).
"""

from . import _attention, _plans
from ._attention import attnjit_attention_forward
from ._paged import attnjit_paged_attention_forward
from ._plans import launches, lengths_written, masks_bound, plans_made

NAME = "attnjit"
PAGED_NAME = "paged|attnjit"

__all__ = ["NAME", "PAGED_NAME", "attnjit_attention_forward", "attnjit_paged_attention_forward", "clear_plans",
           "launches", "lengths_written", "masks_bound", "plans_made", "register"]


def clear_plans():
    """Drops every kept plan, preparation and workspace (their device memory goes back to torch's allocator)."""
    _attention.clear()
    _plans.clear()


def register():
    """Registers "attnjit" (with sdpa's mask function: a bool mask, or None where is_causal serves) and
    "paged|attnjit" with transformers' AttentionInterface; safe to call again."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, attnjit_attention_forward)
    AttentionInterface.register(PAGED_NAME, attnjit_paged_attention_forward)
    # Without an entry here transformers builds no mask at all for "attnjit" (its padding would be lost).
    # Continuous batching's "paged|attnjit" must have none: it passes the request boundaries instead.
    AttentionMaskInterface.register(NAME, sdpa_mask)


register()

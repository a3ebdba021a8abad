"""Plans kept across layers: every layer of a forward step has the same shapes and the same page table, so
attnjit plans (host work: reading the table, choosing the split) once per step and distinct table, not
once per layer. Layers of different kinds (sliding-window and full layers, Gemma-2's and Mistral's) each
get their own entry, keyed by everything the plan depends on. Prefill and continuous batching plan here;
generate()'s decode steps keep plans across steps (_decode_steps.py). The lock, the shared workspace and
the counters serve all of them."""

import collections
import threading

# One lock for the caches: continuous batching runs the model from its own thread.
LOCK = threading.RLock()

_WORKSPACE_BYTES = 128 << 20
_MAX_PLANS = 8  # per wrapper kind; a step has a handful of distinct tables (a full and a sliding one, ...)

_workspaces = {}
_plans = {"prefill": collections.OrderedDict()}

# Launches by path, and plans made by wrapper kind, since import: the tests check that a model really ran
# through attnjit and planned once per step (prefill) or once per capacity (decode), never once per layer.
launches = collections.Counter()
plans_made = collections.Counter()
# Writes of a decode step's kv_len to its plan's device lengths (_decode_steps.py): once per step and layer kind.
lengths_written = collections.Counter()
# Binds of a decode step's mask to its plan's variant (_decode_mask.py): once per step and layer kind.
masks_bound = collections.Counter()


def workspace(torch, device):
    """The float scratch all of this module's wrappers share on a device (FlashInfer's sharing rule: one
    stream at a time, which the model's forward is)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _workspaces:
        _workspaces[index] = torch.empty(_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    return _workspaces[index]


def planned(torch, kind, key, device, plan, keep_alive=()):
    """(wrapper, what plan returned) for `key`: the wrapper of `kind` ("prefill") kept for it, or
    the least recently used one planned again by plan(wrapper). keep_alive: objects whose identity the key
    holds (kept with it, so no other object takes their id meanwhile)."""
    cache = _plans[kind]
    key = (device, key)
    entry = cache.get(key)
    if entry is not None:
        cache.move_to_end(key)
        return entry[0], entry[1]
    from ...batch_prefill import BatchPrefillWithPagedKVCacheWrapper

    if len(cache) >= _MAX_PLANS:
        wrapper = cache.popitem(last=False)[1][0]
    else:
        wrapper = BatchPrefillWithPagedKVCacheWrapper(workspace(torch, device), kv_layout="HND")
    info = plan(wrapper)  # a wrapper whose plan() raised is dropped here, never kept half planned
    plans_made[kind] += 1
    cache[key] = (wrapper, info, tuple(keep_alive))
    return wrapper, info


def clear():
    """Drops every kept plan and workspace (their device memory goes back to torch's allocator)."""
    with LOCK:
        for cache in _plans.values():
            cache.clear()
        _workspaces.clear()

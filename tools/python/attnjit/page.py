"""FlashInfer's paged-cache helpers (flashinfer.page) over the C API (attnjit_page.h):
append_paged_kv_cache, get_batch_indices_positions and get_seq_lens, with FlashInfer 0.7.2's
signatures and semantics.

append_paged_kv_cache and get_batch_indices_positions are one kernel launch each on torch's
current stream: no host sync, so both record into CUDA graphs (after a first call has loaded
the kernel). Index tensors must be torch.int32 CUDA tensors, as FlashInfer's kernels require;
other dtypes are refused by name rather than converted behind the caller's back. The append
copies rows: append_key/append_value and the cache share one dtype (float16, bfloat16,
float8_e4m3fn or float8_e5m2). A row whose request, position or page id lies outside the
tables is skipped by the kernel, never written elsewhere, and raised as INVALID_ARGUMENT (naming the
array, the index and the value) by the next append on that device or by check_tables(device).

torch is imported inside the calls only, so ``import attnjit`` works without it.
"""

import ctypes
import operator

from . import _runtime
from ._dlpack import Borrowed, require_torch
from ._library import check, lib
from ._streams import current_stream
from .errors import invalid_argument

_KV_LAYOUTS = {"NHD": 0, "HND": 1}
_declared = False


def _c():
    """The library, with attnjit_page.h's functions declared (once)."""
    global _declared
    library = lib()
    if not _declared:
        p, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
        signatures = {
            "attnjit_append_paged_kv_cache": [p, p, p, p, p, p, p, p, p, p, i32, p],
            "attnjit_get_batch_indices_positions": [p, p, p, i64, p, p, p],
        }
        for name, argtypes in signatures.items():
            fn = getattr(library, name)
            fn.restype = ctypes.c_int
            fn.argtypes = argtypes
        _declared = True
    return library


def _tensor(torch, name, t):
    if not isinstance(t, torch.Tensor):
        raise invalid_argument(f"{name}: expected a torch.Tensor, got {type(t).__name__}")


def _index(torch, name, t):
    """An int32 index tensor (FlashInfer's kernels take int32 only); other dtypes are refused, not cast."""
    _tensor(torch, name, t)
    if t.dtype != torch.int32:
        raise invalid_argument(f"{name}: dtype {t.dtype} is not allowed; allowed: torch.int32 (convert with .int())")


def _kv_layout(kv_layout):
    if not isinstance(kv_layout, str) or kv_layout not in _KV_LAYOUTS:
        raise invalid_argument(f"kv_layout={kv_layout!r} is not a KV layout; allowed: NHD, HND")
    return _KV_LAYOUTS[kv_layout]


def _page_size_one(t, kv_layout):
    """FlashInfer's reading of a cache one dimension short: page_size 1, the missing dimension restored."""
    return t.unsqueeze(-3) if kv_layout == "NHD" else t.unsqueeze(-2)


def _cache_views(torch, paged_kv_cache, kv_layout):
    """(k_cache, v_cache) 4-D, or (the 5-D cache, None), as FlashInfer's _unpack_paged_kv_cache reads them."""
    if isinstance(paged_kv_cache, tuple):
        if len(paged_kv_cache) != 2:
            raise invalid_argument(f"paged_kv_cache: a tuple of {len(paged_kv_cache)} tensors is not allowed; "
                                   "allowed: (k_cache, v_cache)")
        halves = []
        for name, t in zip(("paged_kv_cache[0] (k_cache)", "paged_kv_cache[1] (v_cache)"), paged_kv_cache):
            _tensor(torch, name, t)
            if t.dim() not in (3, 4):
                raise invalid_argument(f"{name}: shape {list(t.shape)} is not allowed; allowed: 4-D [pages, "
                                       "page_size, num_kv_heads, head_dim] (NHD) or [pages, num_kv_heads, page_size, "
                                       "head_dim] (HND), or 3-D for page_size 1")
            halves.append(_page_size_one(t, kv_layout) if t.dim() == 3 else t)
        return halves[0], halves[1]
    if isinstance(paged_kv_cache, torch.Tensor):
        if paged_kv_cache.dim() not in (4, 5):
            raise invalid_argument(f"paged_kv_cache: shape {list(paged_kv_cache.shape)} is not allowed; allowed: 5-D "
                                   "[pages, 2, page_size, num_kv_heads, head_dim] (NHD) or [pages, 2, num_kv_heads, "
                                   "page_size, head_dim] (HND), or 4-D for page_size 1, or a tuple (k_cache, v_cache)")
        cache = _page_size_one(paged_kv_cache, kv_layout) if paged_kv_cache.dim() == 4 else paged_kv_cache
        return cache, None
    raise invalid_argument(f"paged_kv_cache: expected a torch.Tensor or a tuple (k_cache, v_cache), got "
                           f"{type(paged_kv_cache).__name__}")


def append_paged_kv_cache(append_key, append_value, batch_indices, positions, paged_kv_cache, kv_indices, kv_indptr,
                          kv_last_page_len, kv_layout="NHD"):
    """Writes append_key/append_value [nnz, num_kv_heads, head_dim] into the paged cache: row i goes to
    request batch_indices[i] at position positions[i], page kv_indices[kv_indptr[b] + p // page_size], slot
    p % page_size. paged_kv_cache: a (k_cache, v_cache) tuple of 4-D tensors or one 5-D tensor
    [pages, 2, ...], per kv_layout ("NHD" or "HND"). kv_indices, kv_indptr [batch_size + 1] and
    kv_last_page_len [batch_size] already count the appended rows. Returns None."""
    layout = _kv_layout(kv_layout)
    torch = require_torch()
    _tensor(torch, "append_key", append_key)
    _tensor(torch, "append_value", append_value)
    for name, t in (("batch_indices", batch_indices), ("positions", positions), ("kv_indices", kv_indices),
                    ("kv_indptr", kv_indptr), ("kv_last_page_len", kv_last_page_len)):
        _index(torch, name, t)
    k_cache, v_cache = _cache_views(torch, paged_kv_cache, kv_layout)
    with Borrowed() as borrowed, current_stream(torch, append_key.device) as stream:
        check(_c().attnjit_append_paged_kv_cache(
            _runtime.handle(), borrowed.tensor(append_key, "append_key"),
            borrowed.tensor(append_value, "append_value"), borrowed.tensor(batch_indices, "batch_indices"),
            borrowed.tensor(positions, "positions"), borrowed.tensor(k_cache, "k_cache"),
            borrowed.optional(v_cache, "v_cache"), borrowed.tensor(kv_indices, "kv_indices"),
            borrowed.tensor(kv_indptr, "kv_indptr"), borrowed.tensor(kv_last_page_len, "kv_last_page_len"), layout,
            stream))


def _output(torch, name, t, nnz, device):
    """FlashInfer's check_shape_dtype_device on a given output tensor."""
    _tensor(torch, name, t)
    if tuple(t.shape) != (nnz,):
        raise invalid_argument(f"{name}: shape {list(t.shape)} is not allowed; allowed: [{nnz}] (nnz)")
    if t.dtype != torch.int32:
        raise invalid_argument(f"{name}: dtype {t.dtype} is not allowed; allowed: torch.int32")
    if t.device != device:
        raise invalid_argument(f"{name}: device {t.device} differs from append_indptr's device {device}; they must "
                               "be equal")


def get_batch_indices_positions(append_indptr, seq_lens, nnz, batch_indices=None, positions=None):
    """For a ragged append (append_indptr [batch_size + 1]) to requests of seq_lens [batch_size] rows
    (appended rows included), each of the nnz entries' request and position: entry j with
    append_indptr[b] <= j < append_indptr[b + 1] gets b and j + seq_lens[b] - append_indptr[b + 1]; an
    entry no request covers gets batch index -1 and keeps its position (0 when allocated here). Writes
    into batch_indices / positions when given (int32 [nnz] on append_indptr's device). Returns
    (batch_indices, positions)."""
    torch = require_torch()
    _index(torch, "append_indptr", append_indptr)
    _index(torch, "seq_lens", seq_lens)
    try:
        if isinstance(nnz, bool):
            raise TypeError
        nnz = operator.index(nnz)
    except TypeError:
        raise invalid_argument(f"nnz={nnz!r} is not allowed; allowed: an int >= 0") from None
    if nnz < 0:
        raise invalid_argument(f"nnz={nnz} is not allowed; allowed: an int >= 0")
    device = append_indptr.device
    if batch_indices is None:
        batch_indices = torch.empty((nnz,), dtype=torch.int32, device=device)  # every entry is written
    else:
        _output(torch, "batch_indices", batch_indices, nnz, device)
    if positions is None:
        positions = torch.zeros((nnz,), dtype=torch.int32, device=device)  # uncovered entries stay 0
    else:
        _output(torch, "positions", positions, nnz, device)
    with Borrowed() as borrowed, current_stream(torch, device) as stream:
        check(_c().attnjit_get_batch_indices_positions(
            _runtime.handle(), borrowed.tensor(append_indptr, "append_indptr"), borrowed.tensor(seq_lens, "seq_lens"),
            nnz, borrowed.tensor(batch_indices, "batch_indices"), borrowed.tensor(positions, "positions"), stream))
    return batch_indices, positions


def get_seq_lens(kv_indptr, kv_last_page_len, page_size):
    """Each request's length in a paged cache: (pages - 1) * page_size + kv_last_page_len, a request without
    pages counting kv_last_page_len alone (FlashInfer's arithmetic, in torch)."""
    torch = require_torch()
    return torch.clamp(kv_indptr[1:] - kv_indptr[:-1] - 1, min=0) * page_size + kv_last_page_len

"""attnjit.Variant: a user score_mod / mask_mod (CUDA snippets) and its params, over attnjit_variant.h.

The snippets are the BODIES of device functions with fixed signatures::

    float score_mod(float s, int b, int h, int q, int kv, const Params& p)
    bool  mask_mod(int b, int h, int q, int kv, const Params& p)

s is sm_scale * q.k (natural-log units), the result the logit before softmax;
b the request (0 in the single calls), h the query head, q the query's index
among its request's queries, kv the key's index. The params are members of
``p``: a tensor param ``x`` of rank R reads as ``p.x_at(i, ..)`` (also ``p.x``,
``p.x_shape[R]``, ``p.x_stride[R]``); a float scalar as ``p.x`` (float), an int
as ``p.x`` (int32_t). Example: ``mask_mod="return p.doc_at(q) == p.doc_at(kv);"``. The snippets are compiled into
the exact kernels and run on the GPU with the caller's rights: code, not data.
They compile with ``--prec-div=false``: ``/`` is the fast division (within 2
ulp) Triton's is. A score_mod runs once per score, so a division by a param
costs a reciprocal per score: pass the reciprocal instead (``s * p.rcp_cap``,
not ``s / p.cap``), as the built-in soft cap does. In prefill a score_mod also
runs on pairs the mask drops (kv and q still within the request), as
FlexAttention's does, and that result is discarded: it must not assume
``kv <= q`` when it indexes a tensor.

Params are declared from the values given (a torch tensor: its dtype and rank;
a float: f32; an int: i32). Plans made with a variant read its bound values at
each run, so ``variant.bind(name=new_value)`` between runs needs no new plan.

Block sparsity (FlexAttention's BlockMask, ``block_sparse=True``; needs a
mask_mod; single prefill, and the ragged and paged batch prefill wrappers with
``b`` the request): mask_mod is evaluated on the GPU over
each (query tile, KV tile) of the plan, classifying it empty, full or partial;
the kernel then skips the empty tiles (no load, no math) and evaluates mask_mod
only on the partial ones. ``heads_vary=False`` is the caller's promise that
mask_mod does not read ``h`` (FlexAttention's ``H=None``): one classification
then serves every head, each token evaluated once; the output is wrong if the
mask does read it. Decode, and the batch wrappers with ``use_cuda_graph=True``,
refuse a block-sparse variant (UNSUPPORTED).

When it classifies, ``reclassify=``:

- ``"each_run"`` (default): every run classifies first, into its workspace. The
  classes follow the values of that run: a ``bind`` and a tensor param rewritten
  in place are both seen; a captured CUDA graph replays the classification.
- ``"on_bind"``: a plan keeps the classes it made (one copy per stream, in memory
  of its own) and classifies again only when this variant was bound (``bind`` of
  any param) since that copy was made; no host sync. The one-call
  ``single_prefill_with_kv_cache`` keeps them in its memoized plan. NOT seen: a
  tensor param rewritten in place without a ``bind`` (bind it again, even to the
  same tensor, to have it seen). A batch wrapper's ``plan()`` makes its kept
  classes stale (the next run classifies). A run on a capturing stream classifies as
  ``"each_run"`` does, so a captured graph replays its own classification; so
  does a run on a fifth stream of one plan.
"""

import ctypes
import json

from ._library import check, lib
from .errors import invalid_argument

# When a block-sparse variant's tiles are classified (attnjit/variant.hpp, Reclassify).
_RECLASSIFY = ("each_run", "on_bind")

# torch dtype name -> the declaration's type (attnjit/variant.hpp).
_TENSOR_TYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "int32": "i32", "uint8": "u8",
                 "int64": "i64"}


def _declare(name, value):
    """{"name", "type", "rank"} for a value, or an AttnjitError naming the param."""
    if isinstance(value, bool):
        raise invalid_argument(f"params['{name}']: a bool is not allowed; allowed: a torch tensor, a float (f32) or "
                               "an int (i32)")
    if isinstance(value, int):
        return {"name": name, "type": "i32", "rank": 0}
    if isinstance(value, float):
        return {"name": name, "type": "f32", "rank": 0}
    dtype = getattr(value, "dtype", None)
    if dtype is None or not hasattr(value, "dim"):
        raise invalid_argument(f"params['{name}']: {type(value).__name__} is not allowed; allowed: a torch tensor, "
                               "a float (f32) or an int (i32)")
    kind = _TENSOR_TYPES.get(str(dtype).replace("torch.", ""))
    if kind is None:
        raise invalid_argument(f"params['{name}']: dtype {dtype} is not allowed; allowed: "
                               f"{', '.join('torch.' + k for k in _TENSOR_TYPES)}")
    if not 1 <= value.dim() <= 4:
        raise invalid_argument(f"params['{name}']: a tensor of rank {value.dim()} is not allowed; allowed: rank 1 "
                               "to 4 (a python float or int for a scalar)")
    return {"name": name, "type": kind, "rank": value.dim()}


def _text(name, snippet):
    if snippet is None:
        return None
    if not isinstance(snippet, str):
        raise invalid_argument(f"{name}: expected a str (the body of the device function), got "
                               f"{type(snippet).__name__}")
    return snippet.encode("utf-8")


class Variant:
    """A user attention variant: ``Variant(score_mod=..., mask_mod=..., params={name: value})``.

    Pass it as ``variant=`` to the single functions and to the wrappers' plan().
    ``bind(**values)`` replaces param values (same dtype and rank); the next
    run of every plan made with this variant reads them (and, with
    ``reclassify="on_bind"``, classifies the tiles again). Tensors are kept
    alive by the variant until rebound.
    """

    def __init__(self, score_mod=None, mask_mod=None, params=None, *, block_sparse=False, heads_vary=True,
                 reclassify="each_run"):
        params = {} if params is None else params
        for name, flag in (("block_sparse", block_sparse), ("heads_vary", heads_vary)):
            if not isinstance(flag, bool):
                raise invalid_argument(f"{name}={flag!r} is not allowed; expected True or False")
        if reclassify not in _RECLASSIFY:
            raise invalid_argument(f"reclassify={reclassify!r} is not allowed; allowed: "
                                   f"{', '.join(repr(r) for r in _RECLASSIFY)}")
        if not isinstance(params, dict):
            raise invalid_argument(f"params: expected a dict of name -> value, got {type(params).__name__}")
        declaration = [_declare(name, value) for name, value in params.items()]
        self._handle = None
        self._values = {}
        self.score_mod, self.mask_mod = score_mod, mask_mod
        self.block_sparse, self.heads_vary, self.reclassify = block_sparse, heads_vary, reclassify
        self.params = [dict(p) for p in declaration]
        handle = ctypes.c_void_p()
        if block_sparse or not heads_vary or reclassify != "each_run":
            _text("score_mod", score_mod), _text("mask_mod", mask_mod)  # the same type checks
            source = {"score_mod": score_mod, "mask_mod": mask_mod, "params": declaration,
                      "block_sparse": block_sparse, "heads_vary": heads_vary, "reclassify": reclassify}
            create = lib().attnjit_variant_create_from_json
            create.argtypes, create.restype = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int
            check(create(json.dumps(source).encode("utf-8"), ctypes.byref(handle)))
        else:
            check(lib().attnjit_variant_create(_text("score_mod", score_mod), _text("mask_mod", mask_mod),
                                               json.dumps(declaration).encode("utf-8"), ctypes.byref(handle)))
        self._handle = handle
        self.bind(**params)

    def bind(self, **values):
        """Binds each named param (declared at construction) to a new value for the next runs."""
        from ._dlpack import Borrowed

        for name, value in values.items():
            name_b = name.encode("utf-8")
            if isinstance(value, bool):
                raise invalid_argument(f"variant param '{name}': a bool is not allowed; allowed: a torch tensor, a "
                                       "float or an int, as declared")
            if isinstance(value, int):
                check(lib().attnjit_variant_bind_i32(self._handle, name_b, value))
            elif isinstance(value, float):
                check(lib().attnjit_variant_bind_f32(self._handle, name_b, value))
            else:
                with Borrowed() as borrowed:  # the library keeps the address, shape and strides, not the capsule
                    check(lib().attnjit_variant_bind_tensor(self._handle, name_b, borrowed.tensor(value, name)))
            self._values[name] = value

    @property
    def handle(self):
        """The attnjit_variant_t* (for options structs)."""
        return self._handle

    def __repr__(self):
        sparse = (f", block_sparse=True, heads_vary={self.heads_vary}, reclassify={self.reclassify!r}"
                  if self.block_sparse else "")
        return f"Variant(score_mod={self.score_mod!r}, mask_mod={self.mask_mod!r}, params={self.params!r}{sparse})"

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None and handle.value:
            try:
                lib().attnjit_variant_destroy(handle)
            except Exception:  # interpreter shutdown: the library may be gone
                pass


def variant_handle(variant):
    """The handle to put in an options struct's `variant` field (None: no variant), or an AttnjitError."""
    if variant is None:
        return None
    if not isinstance(variant, Variant):
        raise invalid_argument(f"variant: expected an attnjit.Variant, got {type(variant).__name__}")
    return variant.handle

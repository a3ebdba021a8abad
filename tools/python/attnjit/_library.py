"""Finds and opens libattnjit.so, declaring the C API's signatures once.

Search order: the copy inside this package (an installed wheel: `pip
install .`), so the Python code and the library it was built with always go
together; else $ATTNJIT_LIBRARY (then the only candidate: falling back would
hide a typo); else the repository's build/ folder when run from a checkout
(tools/python/../../build); then the system's search (find_library).
Opening is lazy, so ``import attnjit`` works before the library is built.
"""

import ctypes
import ctypes.util
import os
import threading
import warnings

from . import _ctypes_types as c_types
from .errors import AttnjitError

# attnjit.h's ATTNJIT_ABI_VERSION that _ctypes_types mirrors.
ABI_VERSION = 2

_lock = threading.Lock()
_lib = None


def packaged_path():
    """Where an installed wheel keeps libattnjit.so (beside this file)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libattnjit.so")


def _candidates():
    env = os.environ.get("ATTNJIT_LIBRARY")
    packaged = packaged_path()
    if os.path.exists(packaged):
        if env and os.path.realpath(env) != os.path.realpath(packaged):
            warnings.warn(f"ATTNJIT_LIBRARY={env} is ignored: this installed attnjit package uses its own "
                          f"{packaged}", stacklevel=3)
        return [packaged]
    if env:
        # An explicit choice is the only candidate: falling back would hide a typo.
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.normpath(os.path.join(here, "..", "..", "..", "build", "libattnjit.so"))]
    system = ctypes.util.find_library("attnjit")
    if system:
        found.append(system)
    return found


def _declare(lib):
    c_int, c_size_t, c_char_p, c_void_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p
    pp = ctypes.POINTER(c_void_p)  # out-parameter for a handle
    opts = ctypes.POINTER(c_types.DecodeOptions)
    popts = ctypes.POINTER(c_types.PrefillOptions)
    i32p = ctypes.POINTER(ctypes.c_int32)
    signatures = {
        "attnjit_version": (c_char_p, []),
        "attnjit_version_number": (c_int, []),
        "attnjit_status_string": (c_char_p, [c_int]),
        "attnjit_last_error": (c_char_p, []),
        "attnjit_runtime_create": (c_int, [pp]),
        "attnjit_runtime_destroy": (c_int, [c_void_p]),
        # The sized inits write the layout this module's structs have (the unsized symbols write older ones).
        "attnjit_decode_options_init_sized": (None, [opts, ctypes.c_uint32]),
        "attnjit_decode_options_init": (None, [opts]),
        "attnjit_single_decode_plan": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, opts, c_int, pp]),
        "attnjit_single_decode_plan_workspace_bytes": (c_int, [c_void_p, ctypes.POINTER(c_size_t)]),
        "attnjit_single_decode_run": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p]),
        "attnjit_single_decode_plan_destroy": (c_int, [c_void_p]),
        "attnjit_single_decode_with_kv_cache": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, opts, c_void_p, c_size_t, c_void_p]),
        "attnjit_prefill_options_init_sized": (None, [popts, ctypes.c_uint32]),
        "attnjit_prefill_options_init": (None, [popts]),
        "attnjit_single_prefill_with_kv_cache": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, popts, c_void_p, c_size_t, c_void_p,
                    c_size_t, c_void_p]),
        "attnjit_single_prefill_workspace_bytes": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, popts, c_int, c_int, ctypes.POINTER(c_size_t)]),
        "attnjit_batch_prefill_create": (c_int, [c_void_p, c_int, c_void_p, c_size_t, c_int, c_char_p, c_int, pp]),
        "attnjit_batch_prefill_plan": (
            c_int, [c_void_p, i32p, i32p, c_size_t, i32p, c_size_t, i32p, c_int, c_int, c_int, c_int, popts, c_char_p,
                    c_char_p, ctypes.POINTER(ctypes.c_uint8), c_size_t, c_void_p]),
        "attnjit_batch_prefill_create_v2": (
            c_int, [c_void_p, c_int, c_void_p, c_size_t, c_int, c_char_p, c_int, c_int, c_void_p, c_void_p, c_void_p,
                    c_void_p, c_void_p, c_void_p, pp]),
        "attnjit_batch_prefill_run": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]),
        "attnjit_batch_prefill_run_v2": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, ctypes.c_float, ctypes.c_float,
                    c_void_p]),
        "attnjit_batch_prefill_workspace_bytes": (c_int, [c_void_p, ctypes.POINTER(c_size_t)]),
        "attnjit_batch_prefill_destroy": (c_int, [c_void_p]),
        "attnjit_dltensor_view_as": (c_int, [c_void_p, c_char_p, c_void_p]),
        "attnjit_check_version": (c_int, [c_int]),
        "attnjit_plan_workspace_bytes": (c_int, [c_void_p, ctypes.POINTER(c_size_t)]),
        "attnjit_plan_operator": (c_char_p, [c_void_p]),
        "attnjit_plan_describe": (c_int, [c_void_p, c_char_p, c_size_t, ctypes.POINTER(c_size_t)]),
        "attnjit_plan_destroy": (c_int, [c_void_p]),
        # attnjit_batch_decode.h
        "attnjit_batch_decode_wrapper_options_init": (None, [ctypes.POINTER(c_types.BatchDecodeWrapperOptions)]),
        "attnjit_batch_decode_plan_options_init_sized": (
            None, [ctypes.POINTER(c_types.BatchDecodePlanOptions), ctypes.c_uint32]),
        "attnjit_batch_decode_plan_options_init": (None, [ctypes.POINTER(c_types.BatchDecodePlanOptions)]),
        "attnjit_trtllm_decode_options_init": (None, [ctypes.POINTER(c_types.TrtllmDecodeOptions)]),
        "attnjit_batch_decode_wrapper_create": (
            c_int, [c_void_p, c_void_p, c_size_t, ctypes.POINTER(c_types.BatchDecodeWrapperOptions), c_void_p, c_void_p,
                    c_void_p, pp]),
        "attnjit_batch_decode_wrapper_plan": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_int, c_int, c_int, c_int,
                    ctypes.POINTER(c_types.BatchDecodePlanOptions), c_void_p]),
        "attnjit_batch_decode_wrapper_run": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, ctypes.c_float, ctypes.c_float,
                    c_void_p]),
        "attnjit_batch_decode_wrapper_run_v2": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, ctypes.c_float, ctypes.c_float,
                    c_int, c_void_p]),
        "attnjit_trtllm_batch_decode_with_kv_cache": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p, c_void_p, ctypes.c_int64,
                    ctypes.POINTER(c_types.TrtllmDecodeOptions), c_void_p, c_void_p, c_void_p]),
        "attnjit_trtllm_batch_decode_with_kv_cache_v2": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p, c_void_p, ctypes.c_int64,
                    ctypes.POINTER(c_types.TrtllmDecodeOptions), c_void_p, c_int, c_void_p, c_void_p, c_void_p]),
        "attnjit_trtllm_batch_decode_with_kv_cache_v3": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p, c_void_p, ctypes.c_int64,
                    ctypes.POINTER(c_types.TrtllmDecodeOptions), c_void_p, c_int, c_int, c_int, c_void_p, c_void_p,
                    c_void_p, c_void_p, c_void_p, c_void_p]),
        "attnjit_cudnn_batch_decode_with_kv_cache": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, ctypes.c_float, c_void_p, c_size_t, ctypes.c_int64,
                    c_void_p, c_void_p, c_void_p, c_void_p]),
        "attnjit_cudnn_batch_decode_with_kv_cache_v2": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, ctypes.c_float, c_void_p, c_size_t, ctypes.c_int64,
                    c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]),
        # attnjit_merge_state.h
        "attnjit_merge_state": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]),
        "attnjit_merge_state_in_place": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]),
        "attnjit_merge_states": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    # Functions a newer library adds: declared where present, looked up with has().
    optional = {
        # Plans that own their metadata memory (attnjit.h's memory contract).
        "attnjit_plan_set_int_workspace": (c_int, [c_void_p, c_void_p, c_size_t]),
        "attnjit_plan_int_workspace_bytes": (c_int, [c_void_p, ctypes.POINTER(c_size_t)]),
        # Device-table checks (attnjit.h): a plan's, and the one-call entry points' of a device.
        "attnjit_plan_check": (c_int, [c_void_p]),
        "attnjit_runtime_check": (c_int, [c_void_p, c_int]),
        # attnjit_batch_prefill.h: the batch prefill wrappers as an attnjit_plan_t.
        "attnjit_batch_prefill_wrapper_options_init": (None, [ctypes.POINTER(c_types.BatchPrefillWrapperOptions)]),
        "attnjit_batch_prefill_wrapper_create": (
            c_int, [c_void_p, c_void_p, c_size_t, ctypes.POINTER(c_types.BatchPrefillWrapperOptions), c_void_p, c_void_p,
                    c_void_p, c_void_p, c_void_p, c_void_p, pp]),
        "attnjit_batch_prefill_wrapper_plan": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_int, c_int, c_int, c_int, popts,
                    c_types.DLDataType, c_types.DLDataType, c_void_p, c_void_p]),
        "attnjit_batch_prefill_wrapper_run": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, ctypes.c_float, ctypes.c_float,
                    c_void_p]),
        # The wrappers' workspace_size(): what a plan() with given arguments needs, without planning.
        "attnjit_batch_decode_wrapper_workspace_bytes": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_int, c_int, c_int, c_int,
                    ctypes.POINTER(c_types.BatchDecodePlanOptions), ctypes.POINTER(c_size_t),
                    ctypes.POINTER(c_size_t)]),
        "attnjit_batch_prefill_wrapper_workspace_bytes": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_int, c_int, c_int, c_int, popts,
                    c_types.DLDataType, c_types.DLDataType, c_void_p, ctypes.POINTER(c_size_t),
                    ctypes.POINTER(c_size_t)]),
        # attnjit_batch_decode.h: TensorRT-LLM's decode with the draft-tree mask.
        "attnjit_trtllm_batch_decode_with_kv_cache_v4": (
            c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p, c_void_p, ctypes.c_int64,
                    ctypes.POINTER(c_types.TrtllmDecodeOptions), c_void_p, c_int, c_int, c_int, c_void_p, c_void_p,
                    c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]),
    }
    # attnjit_variant.h: user variants (score_mod / mask_mod snippets).
    optional.update({
        "attnjit_variant_create": (c_int, [c_char_p, c_char_p, c_char_p, pp]),
        "attnjit_variant_bind_tensor": (c_int, [c_void_p, c_char_p, c_void_p]),
        "attnjit_variant_bind_f32": (c_int, [c_void_p, c_char_p, ctypes.c_float]),
        "attnjit_variant_bind_i32": (c_int, [c_void_p, c_char_p, ctypes.c_int32]),
        "attnjit_variant_destroy": (c_int, [c_void_p]),
    })
    for name, (restype, argtypes) in optional.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = argtypes


def lib():
    """The opened library (opened on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            errors = []
            for path in _candidates():
                if not (os.path.exists(path) or "/" not in path):
                    errors.append(f"{path}: not found")
                    continue
                try:
                    candidate = ctypes.CDLL(path)
                    _declare(candidate)
                except (OSError, AttributeError) as e:
                    errors.append(f"{path}: {e}")
                    continue
                # The ctypes structs here mirror one C ABI; a library of another is refused.
                if candidate.attnjit_check_version(ABI_VERSION) != 0:
                    errors.append(f"{path}: {candidate.attnjit_last_error().decode('utf-8', 'replace')}")
                    continue
                _lib = candidate
                break
            else:
                raise OSError(
                    "attnjit: cannot open libattnjit.so; install the package (pip install .), set "
                    "ATTNJIT_LIBRARY to its path, or build it (cmake -S . -B build && make -C build attnjit). "
                    "Tried: " + "; ".join(errors))
    return _lib


def has(name):
    """Whether the opened library has the C function `name` (one a newer library added)."""
    return getattr(lib(), name, None) is not None


def check(status):
    """Raises AttnjitError with this thread's last error unless status is OK."""
    if status != 0:
        raise AttnjitError(status, lib().attnjit_last_error().decode("utf-8", "replace"))

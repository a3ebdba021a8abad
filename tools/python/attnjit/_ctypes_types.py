"""ctypes mirrors of the C structs that cross the boundary by value.

DLTensor is DLPack's (0.6 through 1.x share this layout); the options structs
are attnjit.h's, attnjit_batch_decode.h's and attnjit_batch_prefill.h's. Keep
them in step with the headers.
"""

import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def _run(c_type, *names):
    """Consecutive fields of one C type, in the header's order."""
    return [(name, c_type) for name in names]


# Every options struct opens with struct_size, set by its *_init function, which the C side checks.
_STRUCT_SIZE = ("struct_size", ctypes.c_uint32)
# The score fields of the decode and prefill options structs, in this order; 0 means "not provided".
_SCORE_FIELDS = _run(ctypes.c_float, "logits_soft_cap", "sm_scale", "rope_scale", "rope_theta")
_VARIANT = ("variant", ctypes.c_void_p)  # attnjit_variant_t* or NULL (added in 0.4)


class DecodeOptions(ctypes.Structure):
    """attnjit.h's attnjit_decode_options_t."""

    _fields_ = [
        _STRUCT_SIZE,
        *_run(ctypes.c_int32, "kv_layout", "pos_encoding_mode", "use_tensor_cores", "window_left"),
        *_run(ctypes.c_float, "q_scale", "k_scale", "v_scale"),
        *_SCORE_FIELDS,
        _VARIANT,
    ]


class BatchDecodeWrapperOptions(ctypes.Structure):
    """attnjit_batch_decode.h's attnjit_batch_decode_wrapper_options_t."""

    _fields_ = [_STRUCT_SIZE, *_run(ctypes.c_int32, "kv_layout", "use_cuda_graph", "use_tensor_cores", "device")]


class BatchDecodePlanOptions(ctypes.Structure):
    """attnjit_batch_decode.h's attnjit_batch_decode_plan_options_t."""

    _fields_ = [
        _STRUCT_SIZE,
        *_run(ctypes.c_int32, "pos_encoding_mode", "window_left"),
        ("q_data_type", DLDataType),
        ("kv_data_type", DLDataType),  # bits 0: q_data_type
        *_SCORE_FIELDS,
        _VARIANT,
    ]


class TrtllmDecodeOptions(ctypes.Structure):
    """attnjit_batch_decode.h's attnjit_trtllm_decode_options_t."""

    _fields_ = [
        _STRUCT_SIZE,
        *_run(ctypes.c_int32, "kv_layout", "window_left", "uses_shared_paged_kv_idx", "use_tensor_cores"),
        *_run(ctypes.c_float, "bmm1_scale", "bmm2_scale"),
    ]


class PrefillOptions(ctypes.Structure):
    """attnjit.h's attnjit_prefill_options_t."""

    _fields_ = [
        _STRUCT_SIZE,
        *_run(ctypes.c_int32, "causal", "kv_layout", "pos_encoding_mode", "allow_fp16_qk_reduction", "window_left"),
        *_SCORE_FIELDS,
        ("backend", ctypes.c_int32),  # 0 auto, 1 fa2, 2 fa3, 3 fa3_ws
        _VARIANT,
        ("o_dtype", DLDataType),  # bits 0: q's (fp8 q writes float16 / bfloat16)
        ("scale_q", ctypes.c_void_p),  # const DLTensor*: fp8 q's per-head float32 scales, or NULL (ones)
        ("scale_k", ctypes.c_void_p),
        ("scale_v", ctypes.c_void_p),
    ]


class BatchPrefillWrapperOptions(ctypes.Structure):
    """attnjit_batch_prefill.h's attnjit_batch_prefill_wrapper_options_t."""

    # backend: attnjit_prefill_backend_t
    _fields_ = [_STRUCT_SIZE, *_run(ctypes.c_int32, "paged", "kv_layout", "backend", "use_cuda_graph", "device")]

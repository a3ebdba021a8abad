"""ctypes mirrors of the C structs that cross the boundary by value.

DLTensor is DLPack's (0.6 through 1.x share this layout); DecodeOptions is
attnjit.h's attnjit_decode_options_t. Keep both in step with the headers.
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


class DecodeOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by attnjit_decode_options_init
        ("kv_layout", ctypes.c_int32),
        ("pos_encoding_mode", ctypes.c_int32),
        ("use_tensor_cores", ctypes.c_int32),
        ("window_left", ctypes.c_int32),
        ("q_scale", ctypes.c_float),
        ("k_scale", ctypes.c_float),
        ("v_scale", ctypes.c_float),
        ("logits_soft_cap", ctypes.c_float),
        ("sm_scale", ctypes.c_float),
        ("rope_scale", ctypes.c_float),
        ("rope_theta", ctypes.c_float),
        ("variant", ctypes.c_void_p),  # attnjit_variant_t* or NULL (added in 0.4)
    ]


# attnjit_batch_decode.h's options structs.
class BatchDecodeWrapperOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by attnjit_batch_decode_wrapper_options_init
        ("kv_layout", ctypes.c_int32),
        ("use_cuda_graph", ctypes.c_int32),
        ("use_tensor_cores", ctypes.c_int32),
        ("device", ctypes.c_int32),
    ]


class BatchDecodePlanOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by attnjit_batch_decode_plan_options_init
        ("pos_encoding_mode", ctypes.c_int32),
        ("window_left", ctypes.c_int32),
        ("q_data_type", DLDataType),
        ("kv_data_type", DLDataType),  # bits 0: q_data_type
        ("logits_soft_cap", ctypes.c_float),
        ("sm_scale", ctypes.c_float),
        ("rope_scale", ctypes.c_float),
        ("rope_theta", ctypes.c_float),
        ("variant", ctypes.c_void_p),  # attnjit_variant_t* or NULL (added in 0.4)
    ]


class TrtllmDecodeOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by attnjit_trtllm_decode_options_init
        ("kv_layout", ctypes.c_int32),
        ("window_left", ctypes.c_int32),
        ("uses_shared_paged_kv_idx", ctypes.c_int32),
        ("use_tensor_cores", ctypes.c_int32),
        ("bmm1_scale", ctypes.c_float),
        ("bmm2_scale", ctypes.c_float),
    ]


class PrefillOptions(ctypes.Structure):
    """attnjit.h's attnjit_prefill_options_t."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by attnjit_prefill_options_init
        ("causal", ctypes.c_int32),
        ("kv_layout", ctypes.c_int32),
        ("pos_encoding_mode", ctypes.c_int32),
        ("allow_fp16_qk_reduction", ctypes.c_int32),
        ("window_left", ctypes.c_int32),
        ("logits_soft_cap", ctypes.c_float),
        ("sm_scale", ctypes.c_float),
        ("rope_scale", ctypes.c_float),
        ("rope_theta", ctypes.c_float),
        ("backend", ctypes.c_int32),  # 0 auto, 1 fa2, 2 fa3, 3 fa3_ws
        ("variant", ctypes.c_void_p),  # attnjit_variant_t* or NULL (added in 0.4)
    ]


class BatchPrefillWrapperOptions(ctypes.Structure):
    """attnjit_batch_prefill.h's attnjit_batch_prefill_wrapper_options_t."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by attnjit_batch_prefill_wrapper_options_init
        ("paged", ctypes.c_int32),
        ("kv_layout", ctypes.c_int32),
        ("backend", ctypes.c_int32),  # attnjit_prefill_backend_t
        ("use_cuda_graph", ctypes.c_int32),
        ("device", ctypes.c_int32),
    ]

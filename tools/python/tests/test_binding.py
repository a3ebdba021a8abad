"""The ctypes binding without torch or a GPU: struct layouts, library
loading, the errno-like last error surfacing as AttnjitError, option checks.

Needs libattnjit.so (see attnjit/_library.py for where it is looked for).
"""

import ctypes

import pytest

import attnjit
from attnjit import _ctypes_types as c_types
from attnjit import decode
from attnjit._library import lib
from attnjit.errors import AttnjitError, Status
from c_inputs import CPU, F32, I32, U8, dltensor, last_error


def test_struct_layouts_match_the_headers():
    assert ctypes.sizeof(c_types.DLTensor) == 48
    assert c_types.DLTensor.dtype.offset == 20 and c_types.DLTensor.shape.offset == 24
    # struct_size (uint32) leads, then 4 int32 and 7 floats: attnjit.h's attnjit_decode_options_t; then the
    # variant pointer (added in 0.4) at the next 8-byte boundary.
    assert c_types.DecodeOptions.variant.offset == 4 + 4 * 4 + 7 * 4
    assert ctypes.sizeof(c_types.DecodeOptions) == 4 + 4 * 4 + 7 * 4 + 8
    assert c_types.DecodeOptions.kv_layout.offset == 4


def test_the_library_serves_this_binding_abi():
    from attnjit._library import ABI_VERSION, lib

    assert lib().attnjit_check_version(ABI_VERSION) == 0
    assert lib().attnjit_check_version(ABI_VERSION + 1) == int(Status.UNSUPPORTED)
    assert b"C ABI" in lib().attnjit_last_error()


def test_version():
    assert attnjit.version().count(".") == 2
    major, minor, patch = (int(x) for x in attnjit.version().split("."))
    assert attnjit.version_number() == major * 10000 + minor * 100 + patch


def test_options_init_defaults():
    o = c_types.DecodeOptions()
    o.window_left = 123
    lib().attnjit_decode_options_init(ctypes.byref(o))
    assert (o.kv_layout, o.pos_encoding_mode, o.use_tensor_cores, o.window_left) == (0, 0, 0, -1)
    assert o.sm_scale == 0.0 and o.rope_theta == 0.0


def test_view_as_relabels_bytes_as_fp8():
    src, _keep = dltensor([16, 2, 64], U8)  # uint8
    out = c_types.DLTensor()
    assert lib().attnjit_dltensor_view_as(ctypes.byref(src), b"float8_e4m3fn", ctypes.byref(out)) == 0
    assert (out.dtype.code, out.dtype.bits, out.dtype.lanes) == (10, 8, 1)
    assert ctypes.addressof(out.shape.contents) == ctypes.addressof(src.shape.contents)


def test_failures_raise_attnjit_error_with_the_library_message():
    src, _keep = dltensor([8, 128])  # float16: not raw bytes
    out = c_types.DLTensor()
    status = lib().attnjit_dltensor_view_as(ctypes.byref(src), b"e4m3", ctypes.byref(out))
    assert status == Status.INVALID_ARGUMENT
    with pytest.raises(AttnjitError) as info:
        from attnjit._library import check
        check(status)
    assert info.value.status is Status.INVALID_ARGUMENT
    assert "cannot be viewed as float8_e4m3fn" in info.value.message
    assert str(info.value).startswith("INVALID_ARGUMENT: ")
    assert isinstance(info.value, RuntimeError)


def test_plan_refuses_host_memory_naming_q():
    from attnjit import _runtime

    q, _a = dltensor([8, 128], device_type=CPU)
    k, _b = dltensor([100, 2, 128])
    o = c_types.DecodeOptions()
    lib().attnjit_decode_options_init(ctypes.byref(o))
    plan = ctypes.c_void_p()
    status = lib().attnjit_single_decode_plan(_runtime.handle(), ctypes.byref(q), ctypes.byref(k),
                                              ctypes.byref(k), ctypes.byref(o), 0, ctypes.byref(plan))
    assert status == Status.INVALID_ARGUMENT
    assert last_error().startswith("q: device_type=1 (kDLCPU) is not supported")
    assert not plan.value


@pytest.mark.parametrize("kwargs, needle", [
    (dict(kv_layout="NDH"), "kv_layout='NDH' is not a KV layout; allowed: 'NHD', 'HND'"),
    (dict(pos_encoding_mode="ROPE"), "pos_encoding_mode='ROPE' is not a positional encoding"),
    (dict(window_left=-2), "window_left=-2 is not allowed"),
    (dict(sm_scale=0.0), "sm_scale=0.0 is not allowed"),
    (dict(rope_theta=float("nan")), "rope_theta=nan is not allowed; allowed: a finite float"),
])
def test_python_side_option_checks(kwargs, needle):
    args = dict(kv_layout="NHD", pos_encoding_mode="NONE", use_tensor_cores=False, q_scale=None, k_scale=None,
                v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                rope_theta=None)
    args.update(kwargs)
    with pytest.raises(AttnjitError) as info:
        decode._options(**args)
    assert needle in info.value.message


def test_soft_cap_zero_means_no_capping():
    o = decode._options("HND", "ALIBI", True, None, None, None, 64, 0.0, None, None, 5e5)
    assert (o.kv_layout, o.pos_encoding_mode, o.use_tensor_cores, o.window_left) == (1, 2, 1, 64)
    assert o.logits_soft_cap == 0.0 and o.rope_theta == 5e5


def test_batch_prefill_cuda_graph_needs_its_fixed_buffers():
    """use_cuda_graph=1 without qo_indptr_buf, and a float buffer, fail naming the buffer (no device touched)."""
    from attnjit import _runtime

    kv, _a = dltensor([3], I32)  # int32 [max_batch_size + 1]
    f32, _b = dltensor([3], F32)
    handle = ctypes.c_void_p()

    def create(qo_buf, kv_buf):
        return lib().attnjit_batch_prefill_create_v2(_runtime.handle(), 0, ctypes.c_void_p(0x7F0000000000), 1 << 20,
                                                     0, b"auto", 0, 1, qo_buf, kv_buf, None, None, None, None,
                                                     ctypes.byref(handle))

    assert create(None, ctypes.byref(kv)) == Status.INVALID_ARGUMENT
    assert "qo_indptr_buf: is NULL; use_cuda_graph=1 needs it" in last_error()
    assert create(ctypes.byref(f32), ctypes.byref(kv)) == Status.INVALID_ARGUMENT
    assert "qo_indptr_buf: dtype (code 2, bits 32" in last_error()
    assert create(ctypes.byref(kv), ctypes.byref(kv)) == Status.OK
    assert lib().attnjit_batch_prefill_destroy(handle) == Status.OK

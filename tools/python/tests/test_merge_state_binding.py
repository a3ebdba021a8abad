"""The merge functions' binding without a GPU: exports and FlashInfer's
signatures, the library's own refusals reached through ctypes (no torch
needed), and -- where torch is installed, even CPU-only -- the Python entry
points refusing wrong arguments by name before any GPU work.

Needs libattnjit.so (see attnjit/_library.py for where it is looked for).
"""

import ctypes
import inspect

import pytest

import attnjit
from attnjit import _runtime
from attnjit._library import lib
from attnjit.errors import AttnjitError, Status
from c_inputs import BOOL, CPU, F16, F32, dltensor, last_error


def test_exports_and_flashinfer_signatures():
    for name in ("merge_state", "merge_state_in_place", "merge_states"):
        assert name in attnjit.__all__ and callable(getattr(attnjit, name))
    assert list(inspect.signature(attnjit.merge_state).parameters) == ["v_a", "s_a", "v_b", "s_b"]
    in_place = inspect.signature(attnjit.merge_state_in_place).parameters
    assert list(in_place) == ["v", "s", "v_other", "s_other", "mask"]
    assert in_place["mask"].default is None
    assert list(inspect.signature(attnjit.merge_states).parameters) == ["v", "s"]


def test_c_merge_state_refuses_a_float32_v_naming_it():
    v, _a = dltensor([4, 8, 128], F32)
    s, _b = dltensor([4, 8], F32)
    status = lib().attnjit_merge_state(_runtime.handle(), ctypes.byref(v), ctypes.byref(s), ctypes.byref(v),
                                       ctypes.byref(s), ctypes.byref(v), None, None)
    assert status == Status.INVALID_ARGUMENT
    assert last_error() == "v_a: dtype float32 is not supported; allowed: float16, bfloat16"


def test_c_merge_state_in_place_refuses_a_host_mask_and_accepts_a_bool_one():
    v, _a = dltensor([4, 8, 128])
    s, _b = dltensor([4, 8], F32)
    s_other, _c = dltensor([4, 8], F16)  # wrong: refused after the mask
    host_mask, _d = dltensor([4], BOOL, device_type=CPU)
    status = lib().attnjit_merge_state_in_place(_runtime.handle(), ctypes.byref(v), ctypes.byref(s), ctypes.byref(v),
                                                ctypes.byref(s_other), ctypes.byref(host_mask), None)
    assert status == Status.INVALID_ARGUMENT
    assert last_error().startswith("mask: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA")
    mask, _e = dltensor([4], BOOL)
    status = lib().attnjit_merge_state_in_place(_runtime.handle(), ctypes.byref(v), ctypes.byref(s), ctypes.byref(v),
                                                ctypes.byref(s_other), ctypes.byref(mask), None)
    assert status == Status.INVALID_ARGUMENT
    assert last_error().startswith("s_other: dtype must be float32")


def test_c_merge_states_refuses_a_three_dimensional_v():
    v, _a = dltensor([4, 8, 128])
    s, _b = dltensor([4, 8], F32)
    status = lib().attnjit_merge_states(_runtime.handle(), ctypes.byref(v), ctypes.byref(s), ctypes.byref(v),
                                        None, None)
    assert status == Status.INVALID_ARGUMENT
    assert "v: ndim=3 is not allowed; allowed: 4" in last_error()


# --- the Python entry points' own checks: need torch (CPU-only is enough), no GPU ---

@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="torch is not installed")


def _state(torch, seq_len=4, heads=8, head_dim=128):
    return torch.zeros(seq_len, heads, head_dim, dtype=torch.float16), torch.zeros(seq_len, heads)


def _refused(call, needle):
    with pytest.raises(AttnjitError) as info:
        call()
    assert info.value.status == Status.INVALID_ARGUMENT
    assert needle in info.value.message


def test_merge_state_refuses_by_name(torch):
    v, s = _state(torch)
    _refused(lambda: attnjit.merge_state(v, s, [1.0], s), "v_b: expected a torch.Tensor, got list")
    _refused(lambda: attnjit.merge_state(v[0], s, v, s),
             "v_a: shape [8, 128] is not allowed; allowed: [seq_len, num_heads, head_dim]")
    _refused(lambda: attnjit.merge_state(v, s, v, s), "v_a: device cpu is not allowed; allowed: a CUDA tensor")


def test_merge_state_in_place_refuses_by_name(torch):
    v, s = _state(torch)
    _refused(lambda: attnjit.merge_state_in_place(v, s, v, "s"), "s_other: expected a torch.Tensor, got str")
    _refused(lambda: attnjit.merge_state_in_place(v, s, v, s, mask=torch.ones(4)),
             "mask: dtype torch.float32 is not allowed; allowed: torch.bool")
    _refused(lambda: attnjit.merge_state_in_place(v, s, v, s, mask=torch.ones(3, dtype=torch.bool)),
             "mask: shape [3] is not allowed; allowed: [seq_len] with seq_len=4 from v")
    _refused(lambda: attnjit.merge_state_in_place(v, s, v, s, mask=torch.ones(4, dtype=torch.bool)),
             "v: device cpu is not allowed; allowed: a CUDA tensor")


def test_merge_states_refuses_by_name(torch):
    v, s = _state(torch)
    _refused(lambda: attnjit.merge_states(v, s),
             "v: shape [4, 8, 128] is not allowed; allowed: [seq_len, num_states, num_heads, head_dim]")
    _refused(lambda: attnjit.merge_states(v[:, None], None), "s: expected a torch.Tensor, got NoneType")
    _refused(lambda: attnjit.merge_states(v[:, None], s[:, None]), "v: device cpu is not allowed")

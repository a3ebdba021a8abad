"""The ctypes declarations of attnjit_batch_prefill.h and of the plans' int workspace, without a GPU: the options
struct mirrors the header, a wrapper is a generic plan, and plan()'s by-value DLDataType arguments and host
DLTensors reach the library (its refusals name head_dim and q's dtype, which it could not read through a wrong
declaration). Skips where the library predates these functions.

Needs libattnjit.so (see attnjit/_library.py for where it is looked for) and torch (CPU-only is enough) to make
the host arrays.
"""

import ctypes

import pytest

import attnjit
from attnjit import _ctypes_types as c_types
from attnjit import _runtime
from attnjit._dlpack import Borrowed
from attnjit._library import has, lib
from attnjit.errors import Status
from attnjit.prefill import prefill_options
from c_inputs import FAKE_DEVICE_POINTER, last_error

if not has("attnjit_batch_prefill_wrapper_create"):
    pytest.skip("this libattnjit.so has no attnjit_batch_prefill_wrapper_* (attnjit_batch_prefill.h)",
                allow_module_level=True)


def test_options_struct_mirrors_the_header():
    options = c_types.BatchPrefillWrapperOptions(paged=7, kv_layout=3, backend=2, use_cuda_graph=1, device=5)
    lib().attnjit_batch_prefill_wrapper_options_init(ctypes.byref(options))
    assert options.struct_size == ctypes.sizeof(c_types.BatchPrefillWrapperOptions) == 6 * 4
    assert (options.paged, options.kv_layout, options.backend, options.use_cuda_graph, options.device) == (0, 0, 0, 0,
                                                                                                          0)


@pytest.fixture
def paged_wrapper():
    options = c_types.BatchPrefillWrapperOptions()
    lib().attnjit_batch_prefill_wrapper_options_init(ctypes.byref(options))
    options.paged = 1
    handle = ctypes.c_void_p()
    assert lib().attnjit_batch_prefill_wrapper_create(
        _runtime.handle(), ctypes.c_void_p(FAKE_DEVICE_POINTER), 1 << 20, ctypes.byref(options), None, None, None,
        None, None, None, ctypes.byref(handle)) == Status.OK, last_error()
    plan = attnjit.Plan(handle)
    yield plan
    plan.destroy()


def test_wrapper_is_a_generic_plan_taking_an_int_workspace(paged_wrapper):
    assert paged_wrapper.operator == "batch_prefill"
    assert "not planned" in paged_wrapper.describe()
    need = ctypes.c_size_t(1)
    assert lib().attnjit_plan_int_workspace_bytes(paged_wrapper.handle, ctypes.byref(need)) == Status.OK
    assert need.value == 0  # nothing planned yet
    assert lib().attnjit_plan_set_int_workspace(paged_wrapper.handle, ctypes.c_void_p(FAKE_DEVICE_POINTER + (1 << 20)),
                                                8 << 20) == Status.OK, last_error()


def test_plan_arguments_reach_the_library(paged_wrapper):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    options = prefill_options(True, "NHD", "NONE", -1, None, None, None, None, "auto")
    arrays = [torch.tensor(a, dtype=torch.int32) for a in ([0, 3, 4], [0, 2, 3], [4, 1, 7], [5, 16])]

    def plan(head_dim, q_type):
        with Borrowed() as borrowed:
            tensors = [borrowed.tensor(t, name) for t, name in
                       zip(arrays, ("qo_indptr", "paged_kv_indptr", "paged_kv_indices", "paged_kv_last_page_len"))]
            return lib().attnjit_batch_prefill_wrapper_plan(paged_wrapper.handle, *tensors, 16, 8, 2, head_dim,
                                                            ctypes.byref(options), q_type,
                                                            c_types.DLDataType(0, 0, 0), None, None)

    assert plan(100, c_types.DLDataType(2, 16, 1)) == Status.UNSUPPORTED
    assert last_error().startswith("head_dim=100 is not supported")
    assert plan(128, c_types.DLDataType(2, 32, 1)) == Status.INVALID_ARGUMENT
    assert last_error().startswith("q.dtype=float32 is not supported; allowed: float16, bfloat16")

"""attnjit.page without a GPU: FlashInfer 0.7.2's signatures, the module importing without torch, the
library's refusals reached through ctypes (no torch needed), and the Python checks that come before torch.

Needs libattnjit.so for the ctypes tests (see attnjit/_library.py for where it is looked for).
"""

import ctypes
import inspect
import subprocess
import sys
import textwrap

import pytest

from attnjit import _runtime, page
from attnjit.errors import AttnjitError, MissingDependencyError, Status
from c_inputs import BF16, CPU, CUDA, F32, I32, I64, dltensor, last_error


# flashinfer/page.py of 0.7.2: (name, default) in order; inspect.Parameter.empty for none.
E = inspect.Parameter.empty
FLASHINFER = {
    "append_paged_kv_cache": [("append_key", E), ("append_value", E), ("batch_indices", E), ("positions", E),
                              ("paged_kv_cache", E), ("kv_indices", E), ("kv_indptr", E), ("kv_last_page_len", E),
                              ("kv_layout", "NHD")],
    "get_batch_indices_positions": [("append_indptr", E), ("seq_lens", E), ("nnz", E), ("batch_indices", None),
                                    ("positions", None)],
    "get_seq_lens": [("kv_indptr", E), ("kv_last_page_len", E), ("page_size", E)],
}


@pytest.mark.parametrize("name", sorted(FLASHINFER))
def test_signatures_are_flashinfers(name):
    params = inspect.signature(getattr(page, name)).parameters.values()
    assert [(p.name, p.default) for p in params] == FLASHINFER[name]
    assert all(p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)


def test_the_module_imports_without_torch():
    code = textwrap.dedent("""
        import sys
        for name in ("torch", "torch.utils", "torch.utils.dlpack"):
            sys.modules[name] = None
        import attnjit.page
        from attnjit.errors import MissingDependencyError
        try:
            attnjit.page.get_seq_lens(object(), object(), 16)
        except MissingDependencyError as e:
            assert "pip install torch" in e.message
        else:
            raise AssertionError("no error without torch")
        """)
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": ":".join(p for p in sys.path if p)})


def test_a_bad_layout_is_refused_before_anything_else():
    with pytest.raises(AttnjitError) as info:
        page.append_paged_kv_cache(*([object()] * 8), kv_layout="NDH")
    assert info.value.status == Status.INVALID_ARGUMENT
    assert info.value.message == "kv_layout='NDH' is not a KV layout; allowed: NHD, HND"


def test_without_torch_the_tensor_calls_name_torch(monkeypatch):
    for name in ("torch", "torch.utils", "torch.utils.dlpack"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingDependencyError, match="pip install torch"):
        page.append_paged_kv_cache(*([object()] * 8))
    with pytest.raises(MissingDependencyError, match="pip install torch"):
        page.get_batch_indices_positions(object(), object(), 4)


class _Append:
    """A valid append's DLTensors (10 rows, 8 heads x 128, bfloat16, 4 requests, a 5-D NHD cache)."""

    def __init__(self):
        self.keep = []
        self.k = self.make([10, 8, 128], BF16)
        self.v = self.make([10, 8, 128], BF16)
        self.cache = self.make([40, 2, 16, 8, 128], BF16)
        self.batch_indices = self.make([10])
        self.positions = self.make([10])
        self.kv_indices = self.make([12])
        self.kv_indptr = self.make([5])
        self.last = self.make([4])

    def make(self, shape, dtype=I32, device_type=CUDA):
        t, arr = dltensor(shape, dtype, device_type)
        self.keep.append(arr)
        return t

    def call(self, layout=0):
        r = ctypes.byref
        return page._c().attnjit_append_paged_kv_cache(
            _runtime.handle(), r(self.k), r(self.v), r(self.batch_indices), r(self.positions), r(self.cache), None,
            r(self.kv_indices), r(self.kv_indptr), r(self.last), layout, None)


def test_c_append_refuses_an_int64_index_array_naming_it():
    a = _Append()
    a.positions = a.make([10], I64)
    assert a.call() == Status.INVALID_ARGUMENT
    assert last_error() == ("positions: dtype (code=0 kDLInt, bits=64, lanes=1) is not allowed; allowed: int32 "
                            "(kDLInt, 32)")


def test_c_append_refuses_a_short_kv_indptr_and_a_host_kv_indices():
    a = _Append()
    a.kv_indptr = a.make([4])
    assert a.call() == Status.INVALID_ARGUMENT
    assert last_error() == ("kv_indptr: shape [4] is not allowed; allowed: [batch_size + 1] with batch_size + 1=5 from "
                            "kv_last_page_len")
    a.kv_indptr = a.make([5])
    a.kv_indices = a.make([12], device_type=CPU)
    assert a.call() == Status.INVALID_ARGUMENT
    assert "kv_indices: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA" in last_error()


def test_c_append_refuses_a_float32_cache_and_a_bad_layout():
    a = _Append()
    a.cache = a.make([40, 2, 16, 8, 128], F32)
    assert a.call() == Status.INVALID_ARGUMENT
    assert "differs from append_key's dtype bfloat16" in last_error()
    assert _Append().call(layout=3) == Status.INVALID_ARGUMENT
    assert last_error() == "kv_layout=3 is not a layout; allowed: 0 (NHD), 1 (HND)"


def test_c_positions_refuses_a_wrong_length_output():
    keep = []

    def make(shape, dtype=I32):
        t, arr = dltensor(shape, dtype)
        keep.append(arr)
        return ctypes.byref(t), t

    indptr, _a = make([5])
    lens, _b = make([4])
    bi, _c = make([7])
    pos, _d = make([8])
    status = page._c().attnjit_get_batch_indices_positions(_runtime.handle(), indptr, lens, 8, bi, pos, None)
    assert status == Status.INVALID_ARGUMENT
    assert last_error() == "batch_indices: shape [7] is not allowed; allowed: [nnz] with nnz=8 from the nnz argument"

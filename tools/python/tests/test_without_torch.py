"""Without torch, the tensor entry points raise an attnjit error saying torch
(or another DLPack producer) is needed, not a bare ModuleNotFoundError.

torch is hidden through sys.modules (a None entry makes `import torch` raise
ImportError), so this runs the same whether or not torch is installed. No
library or GPU is needed: the check comes before either is touched.
"""

import sys

import pytest

import attnjit
from attnjit.errors import AttnjitError, MissingDependencyError, Status


@pytest.fixture
def no_torch(monkeypatch):
    for name in ("torch", "torch.utils", "torch.utils.dlpack"):
        monkeypatch.setitem(sys.modules, name, None)


def test_decode_without_torch_names_torch(no_torch):
    with pytest.raises(AttnjitError) as info:
        attnjit.single_decode_with_kv_cache(object(), object(), object())
    err = info.value
    assert isinstance(err, MissingDependencyError)
    assert isinstance(err, ImportError)  # code catching the old ModuleNotFoundError still works
    assert err.status == Status.UNSUPPORTED
    assert "torch" in err.message and "DLPack" in err.message
    assert "pip install torch" in err.message


def test_borrowed_tensor_without_torch_names_torch(no_torch):
    from attnjit._dlpack import Borrowed

    with pytest.raises(MissingDependencyError, match="torch"):
        with Borrowed() as b:
            b.tensor(object(), "q")


@pytest.mark.parametrize("call", [
    lambda: attnjit.BatchDecodeWithPagedKVCacheWrapper(object()),
    lambda: attnjit.trtllm_batch_decode_with_kv_cache(object(), object(), object(), object(), object(), 16),
    lambda: attnjit.cudnn_batch_decode_with_kv_cache(object(), object(), object(), 0.1, object(),
                                                     max_sequence_kv=16),
], ids=["wrapper", "trtllm", "cudnn"])
def test_batch_decode_without_torch_names_torch(no_torch, call):
    with pytest.raises(MissingDependencyError, match="pip install torch"):
        call()


@pytest.mark.parametrize("call", [
    lambda: attnjit.merge_state(object(), object(), object(), object()),
    lambda: attnjit.merge_state_in_place(object(), object(), object(), object()),
    lambda: attnjit.merge_states(object(), object()),
], ids=["merge_state", "merge_state_in_place", "merge_states"])
def test_merge_without_torch_names_torch(no_torch, call):
    with pytest.raises(MissingDependencyError, match="pip install torch"):
        call()

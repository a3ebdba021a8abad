"""attnjit from Python: a ctypes binding of libattnjit's C API under FlashInfer 0.7.2's names.

Pure Python; torch is imported only inside calls that take tensors, so
``import attnjit`` and ``attnjit.version()`` work without it.
"""

from ._plans import Plan
from ._runtime import check_tables
from .batch_decode import BatchDecodeWithPagedKVCacheWrapper, fast_decode_plan
from .batch_decode_block_tables import cudnn_batch_decode_with_kv_cache, trtllm_batch_decode_with_kv_cache
from .batch_prefill import BatchPrefillWithPagedKVCacheWrapper, BatchPrefillWithRaggedKVCacheWrapper
from .cascade import (BatchDecodeWithSharedPrefixPagedKVCacheWrapper, BatchPrefillWithSharedPrefixPagedKVCacheWrapper,
                      MultiLevelCascadeAttentionWrapper)
from .decode import SingleDecodeWrapper, single_decode_with_kv_cache
from .errors import AttnjitError, Status
from .merge_state import merge_state, merge_state_in_place, merge_states
from .page import append_paged_kv_cache, get_batch_indices_positions, get_seq_lens
from .prefill import single_prefill_with_kv_cache, single_prefill_with_kv_cache_return_lse
from ._variant import Variant

__all__ = ["AttnjitError", "BatchDecodeWithPagedKVCacheWrapper", "BatchDecodeWithSharedPrefixPagedKVCacheWrapper",
           "BatchPrefillWithPagedKVCacheWrapper", "BatchPrefillWithRaggedKVCacheWrapper",
           "BatchPrefillWithSharedPrefixPagedKVCacheWrapper", "MultiLevelCascadeAttentionWrapper", "Plan",
           "SingleDecodeWrapper", "Status", "Variant", "append_paged_kv_cache", "check_tables", "cudnn_batch_decode_with_kv_cache",
           "fast_decode_plan", "get_batch_indices_positions", "get_seq_lens", "merge_state", "merge_state_in_place",
           "merge_states", "single_decode_with_kv_cache", "single_prefill_with_kv_cache",
           "single_prefill_with_kv_cache_return_lse", "trtllm_batch_decode_with_kv_cache", "version", "version_number"]


def version():
    """The loaded library's version string, e.g. "0.1.0"."""
    from ._library import lib

    return lib().attnjit_version().decode()


def version_number():
    """The loaded library's ATTNJIT_VERSION_NUMBER (major*10000 + minor*100 + patch)."""
    from ._library import lib

    return lib().attnjit_version_number()

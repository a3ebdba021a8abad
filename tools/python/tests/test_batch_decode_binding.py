"""Batch decode's binding without a GPU: the ctypes mirrors of
attnjit_batch_decode.h, the init functions' defaults, the library's own
refusals reached through ctypes (no torch needed), and -- where torch is
installed, even CPU-only -- the Python entry points refusing unsupported or
wrong arguments by name before any GPU work.

Needs libattnjit.so (see attnjit/_library.py for where it is looked for).
"""

import ctypes

import pytest

import attnjit
from attnjit import _ctypes_types as c_types
from attnjit import _runtime
from attnjit._library import ABI_VERSION, lib
from attnjit.errors import AttnjitError, Status
from c_inputs import CPU, F16, F32, I32, I64, dltensor, last_error


def test_struct_layouts_match_the_header():
    assert ctypes.sizeof(c_types.BatchDecodeWrapperOptions) == 5 * 4
    assert c_types.BatchDecodeWrapperOptions.device.offset == 16
    # struct_size, 2 int32, 2 DLDataType (4 bytes each), 4 floats, then the variant pointer (8-aligned).
    assert c_types.BatchDecodePlanOptions.variant.offset == 40
    assert ctypes.sizeof(c_types.BatchDecodePlanOptions) == 48
    assert c_types.BatchDecodePlanOptions.q_data_type.offset == 12
    assert c_types.BatchDecodePlanOptions.logits_soft_cap.offset == 20
    assert ctypes.sizeof(c_types.TrtllmDecodeOptions) == 4 + 4 * 4 + 2 * 4
    assert c_types.TrtllmDecodeOptions.bmm1_scale.offset == 20


def test_abi_is_unchanged_by_the_additions():
    # Batch decode only adds functions and structs: callers of ABI 2 keep working.
    assert ABI_VERSION == 2
    assert lib().attnjit_check_version(2) == 0


def test_init_functions_set_the_defaults():
    w = c_types.BatchDecodeWrapperOptions(kv_layout=9, use_cuda_graph=5, device=3)
    lib().attnjit_batch_decode_wrapper_options_init(ctypes.byref(w))
    assert (w.struct_size, w.kv_layout, w.use_cuda_graph, w.use_tensor_cores, w.device) == (20, 0, 0, 0, 0)
    p = c_types.BatchDecodePlanOptions(window_left=7, sm_scale=2.0)
    lib().attnjit_batch_decode_plan_options_init(ctypes.byref(p))
    assert (p.pos_encoding_mode, p.window_left, p.sm_scale) == (0, -1, 0.0)
    assert (p.q_data_type.code, p.q_data_type.bits, p.q_data_type.lanes) == (2, 16, 1)
    assert p.kv_data_type.bits == 0
    r = c_types.TrtllmDecodeOptions()
    lib().attnjit_trtllm_decode_options_init(ctypes.byref(r))
    assert (r.kv_layout, r.window_left, r.uses_shared_paged_kv_idx, r.bmm1_scale, r.bmm2_scale) == (1, -1, 1, 1.0,
                                                                                                     1.0)


def test_wrapper_create_refuses_graph_buffers_without_graph_mode():
    buf, _keep = dltensor([9], I32)
    handle = ctypes.c_void_p()
    status = lib().attnjit_batch_decode_wrapper_create(_runtime.handle(), 0x7F0000000000, 1 << 20, None,
                                                       ctypes.byref(buf), None, None, ctypes.byref(handle))
    assert status == Status.INVALID_ARGUMENT
    assert "paged_kv_indptr_buffer: is given but options->use_cuda_graph=0" in last_error()
    assert not handle.value


def test_wrapper_handle_is_a_generic_plan():
    handle = ctypes.c_void_p()
    assert lib().attnjit_batch_decode_wrapper_create(_runtime.handle(), 0x7F0000000000, 1 << 20, None, None, None,
                                                     None, ctypes.byref(handle)) == 0
    plan = attnjit.Plan(handle)
    assert plan.operator == "batch_decode"
    assert plan.workspace_bytes == 0
    assert "not planned" in plan.describe()
    # The page table must be on the host; the error names it before any device work.
    indptr, _a = dltensor([3], I32)  # kDLCUDA
    rest, _b = dltensor([2], I32, device_type=CPU)
    status = lib().attnjit_batch_decode_wrapper_plan(handle, ctypes.byref(indptr), ctypes.byref(rest),
                                                     ctypes.byref(rest), 8, 2, 128, 16, None, None)
    assert status == Status.INVALID_ARGUMENT
    assert last_error().startswith("indptr: device_type=2 (kDLCUDA) is not allowed")
    plan.destroy()


def test_trtllm_refuses_a_host_block_table_naming_it():
    q, _a = dltensor([2, 8, 128])
    k, _b = dltensor([10, 2, 16, 128])
    tables, _c = dltensor([2, 4], I32, device_type=CPU)
    lens, _d = dltensor([2], I32)
    status = lib().attnjit_trtllm_batch_decode_with_kv_cache(
        _runtime.handle(), ctypes.byref(q), ctypes.byref(k), ctypes.byref(k), 0x7F0000000000, 1 << 20,
        ctypes.byref(tables), ctypes.byref(lens), 64, None, ctypes.byref(q), None, None)
    assert status == Status.INVALID_ARGUMENT
    assert "block_tables: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA" in last_error()


def test_trtllm_v2_refuses_bad_sinks_and_enable_pdl_naming_them():
    q, _a = dltensor([2, 8, 128])
    k, _b = dltensor([10, 2, 16, 128])
    tables, _c = dltensor([2, 4], I32)
    lens, _d = dltensor([2], I32)
    sinks, _e = dltensor([4], F32)  # float32, but 4 entries for 8 query heads

    def call(sinks_ptr, enable_pdl):
        return lib().attnjit_trtllm_batch_decode_with_kv_cache_v2(
            _runtime.handle(), ctypes.byref(q), ctypes.byref(k), ctypes.byref(k), 0x7F0000000000, 1 << 20,
            ctypes.byref(tables), ctypes.byref(lens), 64, None, sinks_ptr, enable_pdl, ctypes.byref(q), None, None)

    assert call(ctypes.byref(sinks), -1) == Status.INVALID_ARGUMENT
    assert last_error() == "sinks: shape [4] is not allowed; allowed: [num_qo_heads] with num_qo_heads=8 from the query"
    assert call(None, 3) == Status.INVALID_ARGUMENT
    assert last_error().startswith("enable_pdl=3 is not allowed; allowed: -1 (the library's default")


def test_trtllm_v3_refuses_bad_query_lengths_and_scale_tensors_naming_them():
    q, _a = dltensor([4, 8, 128])  # 2 requests of q_len_per_req=2
    k, _b = dltensor([10, 2, 16, 128])
    tables, _c = dltensor([2, 4], I32)
    lens, _d = dltensor([2], I32)
    cum, _e = dltensor([3], I32)
    half_scale, _f = dltensor([1], F16)  # float16: not the float32 the kernel reads
    two_scales, _g = dltensor([2], F32)

    def call(q_len_per_req=2, max_q_len=0, cum_ptr=None, bmm1=None, bmm2=None):
        return lib().attnjit_trtllm_batch_decode_with_kv_cache_v3(
            _runtime.handle(), ctypes.byref(q), ctypes.byref(k), ctypes.byref(k), 0x7F0000000000, 1 << 20,
            ctypes.byref(tables), ctypes.byref(lens), 64, None, None, -1, q_len_per_req, max_q_len, cum_ptr, bmm1,
            bmm2, ctypes.byref(q), None, None)

    assert call(q_len_per_req=3) == Status.INVALID_ARGUMENT
    assert last_error().startswith("query: 4 token rows is not allowed with q_len_per_req=3; allowed: a multiple of it")
    assert call(q_len_per_req=0) == Status.INVALID_ARGUMENT
    assert last_error() == "q_len_per_req=0 is not allowed; allowed: >= 1 query tokens per request"
    assert call(max_q_len=2) == Status.INVALID_ARGUMENT
    assert last_error().startswith("max_q_len=2 is not allowed without cum_seq_lens_q; they go together")
    assert call(q_len_per_req=1, cum_ptr=ctypes.byref(cum)) == Status.INVALID_ARGUMENT
    assert last_error().startswith("max_q_len=0 is not allowed with cum_seq_lens_q; they go together")
    assert call(bmm1=ctypes.byref(half_scale)) == Status.INVALID_ARGUMENT
    assert last_error() == ("bmm1_scale: dtype (code=2 kDLFloat, bits=16, lanes=1) is not allowed; allowed: float32 "
                            "(kDLFloat, 32)")
    assert call(bmm2=ctypes.byref(two_scales)) == Status.INVALID_ARGUMENT
    assert last_error() == "bmm2_scale: shape [2] is not allowed; allowed: [] or [1] (one float32 value)"


def test_cudnn_v2_checks_batch_offsets_naming_them():
    q, _a = dltensor([2, 8, 128])
    k, _b = dltensor([10, 2, 16, 128])
    tables, _c = dltensor([2, 4], I32)
    lens, _d = dltensor([2], I32)
    per_request, _e = dltensor([2], I32)
    cumulative, _f = dltensor([3], I32)  # cuDNN's [batch_size + 1]
    too_long, _g = dltensor([4], I32)
    wide, _h = dltensor([3], I64)
    on_host, _i = dltensor([2], I32, device_type=CPU)

    def call(offsets_q, offsets_o, max_sequence_kv=65, rt=True):
        return lib().attnjit_cudnn_batch_decode_with_kv_cache_v2(
            _runtime.handle() if rt else None, ctypes.byref(q), ctypes.byref(k), ctypes.byref(k), 0.1,
            0x7F0000000000, 1 << 20, max_sequence_kv, ctypes.byref(lens), ctypes.byref(tables),
            None if offsets_q is None else ctypes.byref(offsets_q),
            None if offsets_o is None else ctypes.byref(offsets_o), ctypes.byref(q), None)

    # Past the C checks the library refuses max_sequence_kv=65 (4 pages of 16): the offsets were accepted.
    past_the_c_checks = "max_sequence_kv=65 is not allowed; block_tables hold 4 pages of 16 rows"
    for offsets_q, offsets_o in [(None, None), (per_request, None), (None, cumulative), (cumulative, per_request)]:
        assert call(offsets_q, offsets_o) == Status.INVALID_ARGUMENT
        assert past_the_c_checks in last_error()
    assert call(too_long, None) == Status.INVALID_ARGUMENT
    assert last_error() == ("batch_offsets_q: shape [4] is not allowed; allowed: [batch_size] or [batch_size + 1] "
                            "(cuDNN's cumulative form) with batch_size=2 from the query")
    assert call(None, wide) == Status.INVALID_ARGUMENT
    assert last_error() == ("batch_offsets_o: dtype (code=0 kDLInt, bits=64, lanes=1) is not allowed; allowed: int32 "
                            "(kDLInt, 32)")
    assert call(on_host, None) == Status.INVALID_ARGUMENT
    assert last_error().startswith("batch_offsets_q: device_type=1 (kDLCPU) is not allowed; allowed: kDLCUDA")
    assert call(per_request, None, rt=False) == Status.INVALID_ARGUMENT
    assert "attnjit_cudnn_batch_decode_with_kv_cache_v2: rt is NULL" in last_error()


# --- the Python entry points' own checks: need torch (CPU-only is enough), no GPU ---

@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="torch is not installed")


def _trtllm_args(torch):
    q = torch.zeros(2, 8, 128, dtype=torch.float16)
    kv = torch.zeros(10, 2, 2, 16, 128, dtype=torch.float16)
    return dict(query=q, kv_cache=kv, workspace_buffer=torch.zeros(16, dtype=torch.uint8),
                block_tables=torch.zeros(2, 4, dtype=torch.int32), seq_lens=torch.ones(2, dtype=torch.int32),
                max_seq_len=64)


@pytest.mark.parametrize("extra, needle", [
    (dict(out_dtype="nvfp4"), "out_dtype='nvfp4' is not supported on this architecture"),
    (dict(backend="xqa"), "backend='xqa' is not supported: attnjit runs its own kernels; allowed: 'auto'"),
    (dict(kv_cache_sf=(1, 2)), "kv_cache_sf=(1, 2) is not supported"),
    (dict(o_scale=0.5), "o_scale=0.5 is not supported"),
])
def test_trtllm_refuses_unsupported_arguments_by_name(torch, extra, needle):
    with pytest.raises(AttnjitError) as info:
        attnjit.trtllm_batch_decode_with_kv_cache(**_trtllm_args(torch), **extra)
    assert info.value.status == Status.UNSUPPORTED
    assert needle in info.value.message


@pytest.mark.parametrize("extra, needle", [
    (dict(kv_layout="BHD"), "kv_layout='BHD' is not a KV layout; allowed: 'NHD', 'HND'"),
    (dict(window_left=-2), "window_left=-2 is not allowed"),
    (dict(bmm1_scale=0.0), "bmm1_scale=0.0 is not allowed; allowed: a finite float > 0"),
    (dict(max_seq_len=0), "max_seq_len=0 is not allowed"),
    (dict(uses_shared_paged_kv_idx="yes"), "uses_shared_paged_kv_idx='yes' is not allowed"),
])
def test_trtllm_refuses_wrong_values_by_name(torch, extra, needle):
    args = _trtllm_args(torch)
    args.update(extra)
    with pytest.raises(AttnjitError) as info:
        attnjit.trtllm_batch_decode_with_kv_cache(**args)
    assert info.value.status == Status.INVALID_ARGUMENT
    assert needle in info.value.message


def test_trtllm_checks_sinks_and_enable_pdl_by_name(torch):
    args = _trtllm_args(torch)  # 8 query heads
    cases = [
        (dict(sinks=[torch.zeros(8), torch.zeros(8)]), "sinks: a list of 2 items is not allowed"),
        (dict(sinks="0.5"), "sinks: expected a torch.Tensor, got str"),
        (dict(sinks=torch.zeros(8, dtype=torch.int32)), "sinks: dtype torch.int32 is not allowed; allowed: "
                                                         "torch.float32"),
        (dict(sinks=torch.zeros(4)), "sinks: shape [4] is not allowed; allowed: [num_qo_heads] with "
                                     "num_qo_heads=8 from the query"),
        (dict(sinks=torch.zeros(8, 1)), "sinks: shape [8, 1] is not allowed"),
        (dict(enable_pdl=2), "enable_pdl=2 is not allowed; allowed: None (the library's default), True, False"),
        (dict(enable_pdl="on"), "enable_pdl='on' is not allowed"),
    ]
    for extra, needle in cases:
        with pytest.raises(AttnjitError) as info:
            attnjit.trtllm_batch_decode_with_kv_cache(**args, **extra)
        assert info.value.status == Status.INVALID_ARGUMENT, extra
        assert needle in info.value.message, extra


@pytest.mark.parametrize("form", ["none", "pdl-off", "pdl-on", "sinks", "sinks-list-bf16"])
def test_trtllm_accepts_sinks_and_enable_pdl(torch, form):
    extra = {"none": dict(sinks=None, enable_pdl=None),
             "pdl-off": dict(enable_pdl=False),
             "pdl-on": dict(enable_pdl=True),
             "sinks": dict(sinks=torch.linspace(-2, 4, 8)),
             "sinks-list-bf16": dict(sinks=[torch.zeros(8, dtype=torch.bfloat16)])}[form]
    # Accepted arguments get as far as the query's device check (no GPU here).
    with pytest.raises(AttnjitError, match="query: device cpu is not allowed; allowed: a CUDA tensor"):
        attnjit.trtllm_batch_decode_with_kv_cache(**_trtllm_args(torch), **extra)


def test_trtllm_checks_speculative_arguments_and_scale_tensors_by_name(torch):
    args = _trtllm_args(torch)
    cum = torch.tensor([0, 1, 2], dtype=torch.int32)
    cases = [
        (dict(q_len_per_req=0), "q_len_per_req=0 is not allowed; allowed: an int >= 1"),
        (dict(q_len_per_req=1.5), "q_len_per_req=1.5 is not allowed"),
        (dict(max_q_len=4), "max_q_len=4 is not allowed without cum_seq_lens_q; they go together"),
        (dict(cum_seq_lens_q=cum), "cum_seq_lens_q=<tensor of shape [3], torch.int32> is not allowed without "
                                   "max_q_len; they go together"),
        (dict(max_q_len=0, cum_seq_lens_q=cum), "max_q_len=0 is not allowed; allowed: an int >= 1"),
        (dict(bmm1_scale=torch.ones(1, dtype=torch.float64)), "bmm1_scale: dtype torch.float64 is not allowed; "
                                                              "allowed: torch.float32"),
        (dict(bmm2_scale=torch.ones(2)), "bmm2_scale: shape [2] is not allowed; allowed: [] or [1]"),
        (dict(bmm2_scale=torch.ones(1, 1)), "bmm2_scale: shape [1, 1] is not allowed"),
        (dict(bmm1_scale=-1.0), "bmm1_scale=-1.0 is not allowed; allowed: a finite float > 0"),
    ]
    for extra, needle in cases:
        with pytest.raises(AttnjitError) as info:
            attnjit.trtllm_batch_decode_with_kv_cache(**args, **extra)
        assert info.value.status == Status.INVALID_ARGUMENT, extra
        assert needle in info.value.message, (extra, info.value.message)


@pytest.mark.parametrize("form", ["q_len_per_req", "cum_seq_lens_q", "scalar-scales", "one-element-scales"])
def test_trtllm_accepts_speculative_arguments_and_scale_tensors(torch, form):
    extra = {"q_len_per_req": dict(q_len_per_req=2, query=torch.zeros(4, 8, 128, dtype=torch.float16)),
             "cum_seq_lens_q": dict(max_q_len=3, cum_seq_lens_q=torch.tensor([0, 3, 4], dtype=torch.int32),
                                    query=torch.zeros(4, 8, 128, dtype=torch.float16)),
             "scalar-scales": dict(bmm1_scale=torch.tensor(0.1), bmm2_scale=torch.tensor(0.5)),
             "one-element-scales": dict(bmm1_scale=torch.ones(1), bmm2_scale=2.0)}[form]
    args = _trtllm_args(torch)
    args.update(extra)
    # Accepted arguments get as far as the query's device check (no GPU here).
    with pytest.raises(AttnjitError, match="query: device cpu is not allowed; allowed: a CUDA tensor"):
        attnjit.trtllm_batch_decode_with_kv_cache(**args)


def test_cudnn_refuses_by_name(torch):
    q = torch.zeros(2, 8, 128, dtype=torch.float16)
    k = torch.zeros(10, 2, 16, 128, dtype=torch.float16)
    ws = torch.zeros(16, dtype=torch.uint8)
    lens, tables = torch.ones(2, dtype=torch.int32), torch.zeros(2, 4, dtype=torch.int32)
    # K/V offsets have no meaning for a paged cache: refused as unsupported, saying why.
    for name in ("batch_offsets_k", "batch_offsets_v"):
        with pytest.raises(AttnjitError) as info:
            attnjit.cudnn_batch_decode_with_kv_cache(q, k, k, 0.1, ws, max_sequence_kv=64, actual_seq_lens_kv=lens,
                                                     block_tables=tables, **{name: lens})
        assert info.value.status == Status.UNSUPPORTED
        assert info.value.message.startswith(f"{name}=<tensor of shape [2], torch.int32> is not supported: this entry point "
                                             "takes the paged K/V cache through block_tables")
    with pytest.raises(AttnjitError, match="block_tables=None .* is not supported"):
        attnjit.cudnn_batch_decode_with_kv_cache(q, k, k, 0.1, ws, max_sequence_kv=64, actual_seq_lens_kv=lens)
    with pytest.raises(AttnjitError, match="scale=-1.0 is not allowed"):
        attnjit.cudnn_batch_decode_with_kv_cache(q, k, k, -1.0, ws, max_sequence_kv=64, actual_seq_lens_kv=lens,
                                                 block_tables=tables)
    with pytest.raises(AttnjitError, match="q: device cpu is not allowed; allowed: a CUDA tensor"):
        attnjit.cudnn_batch_decode_with_kv_cache(q, k, k, 0.1, ws, max_sequence_kv=64, actual_seq_lens_kv=lens,
                                                 block_tables=tables)


@pytest.mark.parametrize("form", ["q", "o", "both-cumulative", "int64"])
def test_cudnn_accepts_batch_offsets_q_and_o(torch, form):
    q = torch.zeros(2, 8, 128, dtype=torch.float16)
    k = torch.zeros(10, 2, 16, 128, dtype=torch.float16)
    per_request = torch.tensor([1024, 0], dtype=torch.int32)
    cumulative = torch.arange(0, 3, dtype=torch.int32) * (8 * 128)
    extra = {"q": dict(batch_offsets_q=per_request),
             "o": dict(batch_offsets_o=per_request),
             "both-cumulative": dict(batch_offsets_q=cumulative, batch_offsets_o=cumulative),
             "int64": dict(batch_offsets_q=cumulative.long(), batch_offsets_o=per_request.long())}[form]
    # Accepted arguments get as far as q's device check (no GPU here).
    with pytest.raises(AttnjitError, match="q: device cpu is not allowed; allowed: a CUDA tensor"):
        attnjit.cudnn_batch_decode_with_kv_cache(q, k, k, 0.1, torch.zeros(16, dtype=torch.uint8), max_sequence_kv=64,
                                                 actual_seq_lens_kv=torch.ones(2, dtype=torch.int32),
                                                 block_tables=torch.zeros(2, 4, dtype=torch.int32), **extra)


def test_wrapper_refuses_by_name_before_device_work(torch):
    ws = torch.zeros(16, dtype=torch.uint8)
    with pytest.raises(AttnjitError, match="kv_layout='NDH' is not a KV layout"):
        attnjit.BatchDecodeWithPagedKVCacheWrapper(ws, kv_layout="NDH")
    with pytest.raises(AttnjitError, match="use_cuda_graph=2 is not allowed"):
        attnjit.BatchDecodeWithPagedKVCacheWrapper(ws, use_cuda_graph=2)
    with pytest.raises(AttnjitError, match="float_workspace_buffer: device cpu is not allowed"):
        attnjit.BatchDecodeWithPagedKVCacheWrapper(ws)

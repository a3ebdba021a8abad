"""The Python layer's argument checks, without a GPU: a refused value is an AttnjitError naming the argument
(INVALID_ARGUMENT where FlashInfer refuses it too, UNSUPPORTED where FlashInfer computes and attnjit does not).

The checks of attnjit/_args.py need nothing; those reached through the entry points need torch (CPU-only is
enough: each case fails before any device work) and skip without it. A wrapper's plan()/run() checks are
reached on a wrapper built without its C plan (its constructor needs a CUDA workspace).
"""

import inspect
import warnings

import pytest

import attnjit
from attnjit import _args as checks
from attnjit import batch_decode
from attnjit.errors import AttnjitError, Status
from refusals import refused


# --- attnjit/_args.py: no torch needed ---

@pytest.mark.parametrize("call, needle", [
    (lambda: checks.kv_layout("NDH"), "kv_layout='NDH' is not a KV layout; allowed: 'NHD', 'HND'"),
    (lambda: checks.pos_encoding("ROPE"), "pos_encoding_mode='ROPE' is not a positional encoding"),
    (lambda: checks.window(-2), "window_left=-2 is not allowed; allowed: -1 (whole sequence) or an int >= 0"),
    (lambda: checks.window(True), "window_left=True is not allowed"),
    (lambda: checks.flag("causal", 2), "causal=2 is not allowed; allowed: True, False"),
    (lambda: checks.tri_state("enable_pdl", "on"), "enable_pdl='on' is not allowed"),
    (lambda: checks.positive_int("num_qo_heads", 0), "num_qo_heads=0 is not allowed; allowed: an int >= 1"),
    (lambda: checks.c_float("sm_scale", 0.0), "sm_scale=0.0 is not allowed"),
    (lambda: checks.c_float("rope_theta", float("inf")), "rope_theta=inf is not allowed; allowed: a finite float"),
    (lambda: checks.c_float("rope_scale", "x"), "rope_scale='x' is not allowed; allowed: a float"),
    (lambda: checks.soft_cap(-1.0), "logits_soft_cap=-1.0 is not allowed"),
    (lambda: checks.prefill_backend("fa4"), "backend='fa4' is not a backend; allowed: 'auto', 'fa2', 'fa3', 'fa3_ws'"),
    (lambda: checks.together("max_q_len", 3, "cum_seq_lens_q", None),
     "max_q_len=3 is not allowed without cum_seq_lens_q"),
])
def test_invalid_values_are_named(call, needle):
    refused(Status.INVALID_ARGUMENT, needle, call)


@pytest.mark.parametrize("call, needle", [
    (lambda: checks.refuse_if_given(kv_cache_sf=(1, 2)), "kv_cache_sf=(1, 2) is not supported by attnjit"),
    (lambda: checks.refuse_unless("backend", "cudnn", ("auto", "fa2"), "why"),
     "backend='cudnn' is not supported: why; allowed: 'auto', 'fa2'"),
    (lambda: checks.no_extra_args((1, 2)), "*args: 2 extra positional argument(s) (1, 2) are not supported"),
    (lambda: checks.prefill_backend("trtllm-gen"), "backend='trtllm-gen' is not supported"),
    (lambda: checks.prefill_backend("cutlass"), "backend='cutlass' is not supported: attnjit runs its own kernels"),
    (lambda: checks.split_controls(4096, False), "fixed_split_size=4096 is not supported"),
    (lambda: checks.split_controls(None, True), "disable_split_kv=True is not supported"),
    (lambda: checks.head_dims(128, 64), "head_dim_vo=64 is not supported"),
    (lambda: checks.use_fp16_qk_reduction(True), "use_fp16_qk_reduction=True is not supported"),
])
def test_unsupported_values_are_named(call, needle):
    refused(Status.UNSUPPORTED, needle, call)


def test_accepted_values_and_defaults():
    assert checks.split_controls(None, False) is None and checks.split_controls(-1, False) is None  # vLLM passes -1
    assert checks.head_dims(128, None) == 128 and checks.head_dims(128, 128) == 128
    assert checks.c_float("sm_scale", None) == 0.0  # the C API's "not provided"
    assert checks.soft_cap(None) == 0.0 and checks.soft_cap(0) == 0.0 and checks.soft_cap(30) == 30.0
    assert checks.product(None, None) is None and checks.product(2.0, None, 0.5) == 1.0
    assert (checks.tri_state("enable_pdl", None), checks.tri_state("enable_pdl", True)) == (-1, 1)
    checks.no_extra_args(())
    checks.use_fp16_qk_reduction(False)


# --- the decode wrapper's legacy positional plan() arguments: FlashInfer 0.7.2's order and TypeErrors ---

def test_legacy_positional_plan_arguments_take_flashinfers_order():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        merged = batch_decode._merge_legacy_positional(("ROPE_LLAMA", 16, 30.0, "bfloat16", None, None, None, 0.1),
                                                       {"rope_theta": 5e5})
    assert merged == {"pos_encoding_mode": "ROPE_LLAMA", "window_left": 16, "logits_soft_cap": 30.0,
                      "q_data_type": "bfloat16", "kv_data_type": None, "o_data_type": None, "data_type": None,
                      "sm_scale": 0.1, "rope_theta": 5e5}
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_legacy_positional_plan_arguments_refuse_as_python_would():
    with pytest.raises(TypeError, match="at most 16 deprecated optional positional arguments after page_size; got 17"):
        batch_decode._merge_legacy_positional(tuple(range(17)), {})
    with pytest.raises(TypeError, match="got multiple values for argument 'window_left'"):
        batch_decode._merge_legacy_positional(("NONE", 4), {"window_left": 4})


def test_unknown_plan_keyword_is_a_type_error():
    wrapper = object.__new__(attnjit.BatchDecodeWithPagedKVCacheWrapper)
    with pytest.raises(TypeError, match="allow_fp16_qk_reduction"):
        wrapper.plan(None, None, None, 8, 2, 128, 16, allow_fp16_qk_reduction=True)


def test_class_aliases_are_flashinfers():
    for cls in (attnjit.BatchDecodeWithPagedKVCacheWrapper, attnjit.BatchPrefillWithPagedKVCacheWrapper,
                attnjit.BatchPrefillWithRaggedKVCacheWrapper):
        assert cls.begin_forward is cls.plan
        run_return_lse = inspect.getattr_static(cls, "run_return_lse")
        assert run_return_lse.func is cls.run and run_return_lse.keywords == {"return_lse": True}
    cascade = attnjit.MultiLevelCascadeAttentionWrapper
    assert cascade.begin_forward is cascade.plan and cascade.forward is cascade.run
    assert attnjit.single_prefill_with_kv_cache_return_lse.keywords == {"return_lse": True}


# --- through the entry points: torch (CPU-only is enough) ---

@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="torch is not installed")


def _bare_decode_wrapper(**state):
    """A decode wrapper without its C plan: plan()'s and run()'s checks before the library is called."""
    wrapper = object.__new__(attnjit.BatchDecodeWithPagedKVCacheWrapper)
    wrapper._use_cuda_graph, wrapper._fixed_batch_size, wrapper._kv_layout = False, 0, "NHD"
    for name, value in state.items():
        setattr(wrapper, name, value)
    return wrapper


def _page_table(torch, dtype=None):
    dtype = dtype or torch.int32
    return (torch.tensor([0, 2, 3], dtype=dtype), torch.tensor([4, 1, 7], dtype=dtype),
            torch.tensor([5, 16], dtype=dtype))


@pytest.mark.parametrize("kwargs, status, needle", [
    (dict(jit_args=[1]), Status.UNSUPPORTED, "jit_args=[1] is not supported by attnjit"),
    (dict(backend="trtllm-gen"), Status.UNSUPPORTED, "backend='trtllm-gen' is not supported"),
    (dict(kv_layout="NDH"), Status.INVALID_ARGUMENT, "kv_layout='NDH' is not a KV layout"),
    (dict(use_cuda_graph=2), Status.INVALID_ARGUMENT, "use_cuda_graph=2 is not allowed"),
    (dict(), Status.INVALID_ARGUMENT, "float_workspace_buffer: device cpu is not allowed"),
    (dict(backend="fa2"), Status.INVALID_ARGUMENT, "float_workspace_buffer: device cpu is not allowed"),
])
def test_decode_wrapper_constructor(torch, kwargs, status, needle):
    refused(status, needle, attnjit.BatchDecodeWithPagedKVCacheWrapper, torch.zeros(16, dtype=torch.uint8), **kwargs)


@pytest.mark.parametrize("kwargs, status, needle", [
    (dict(window_right=-1), Status.UNSUPPORTED, "window_right=-1 is not supported"),
    (dict(q_len_per_req=2), Status.UNSUPPORTED, "q_len_per_req=2 is not supported"),
    (dict(q_len_per_req=0), Status.INVALID_ARGUMENT, "q_len_per_req=0 is not allowed"),
    (dict(is_causal=True), Status.UNSUPPORTED, "is_causal=True is not supported"),
    (dict(fixed_split_size=2048), Status.UNSUPPORTED, "fixed_split_size=2048 is not supported"),
    (dict(disable_split_kv=True), Status.UNSUPPORTED, "disable_split_kv=True is not supported"),
    (dict(block_tables="table"), Status.UNSUPPORTED, "block_tables='table' is not supported"),
    (dict(o_data_type="float32"), Status.UNSUPPORTED, "o_data_type=torch.float32 is not supported"),
    (dict(q_data_type=None), Status.INVALID_ARGUMENT, "q_data_type=None is not allowed without data_type"),
    (dict(q_data_type="half4"), Status.INVALID_ARGUMENT, "q_data_type='half4' is not a dtype"),
    (dict(logits_soft_cap=-3.0), Status.INVALID_ARGUMENT, "logits_soft_cap=-3.0 is not allowed"),
    (dict(sm_scale=0.0), Status.INVALID_ARGUMENT, "sm_scale=0.0 is not allowed"),
    (dict(non_blocking="yes"), Status.INVALID_ARGUMENT, "non_blocking='yes' is not allowed"),
    (dict(pos_encoding_mode="ROPE"), Status.INVALID_ARGUMENT, "pos_encoding_mode='ROPE'"),
])
def test_decode_plan_refuses_by_name(torch, kwargs, status, needle):
    refused(status, needle, _bare_decode_wrapper().plan, *_page_table(torch), 8, 2, 128, 16, **kwargs)


@pytest.mark.parametrize("name", ["indptr", "indices", "last_page_len"])
def test_decode_plan_refuses_int64_index_arrays_by_name(torch, name):
    arrays = dict(zip(("indptr", "indices", "last_page_len"), _page_table(torch)))
    arrays[name] = arrays[name].long()
    refused(Status.INVALID_ARGUMENT, f"{name}: dtype torch.int64 is not allowed; allowed: torch.int32",
            _bare_decode_wrapper().plan, arrays["indptr"], arrays["indices"], arrays["last_page_len"], 8, 2, 128, 16)


def test_decode_plan_checks_seq_lens_against_the_page_table(torch):
    wrapper = _bare_decode_wrapper()
    # Lengths 16 + 5 = 21 and 16: the page table's (page_size 16).
    refused(Status.INVALID_ARGUMENT, "seq_lens[1]=15 is not allowed; allowed: 16", wrapper.plan,
            *_page_table(torch), 8, 2, 128, 16, seq_lens=torch.tensor([21, 15], dtype=torch.int32))
    refused(Status.INVALID_ARGUMENT, "seq_lens: dtype torch.int64 is not allowed", wrapper.plan,
            *_page_table(torch), 8, 2, 128, 16, seq_lens=torch.tensor([21, 16]))


def test_decode_plan_data_type_is_the_deprecated_dtype_alias(torch):
    assert checks.plan_dtypes(torch, "float16", None, None, "float8_e4m3fn") == (torch.float16, torch.float8_e4m3fn,
                                                                                 torch.float16)
    assert checks.plan_dtypes(torch, None, None, None, torch.bfloat16) == (torch.bfloat16,) * 3
    assert checks.plan_dtypes(torch, "bfloat16", "float16", "bfloat16") == (torch.bfloat16, torch.float16,
                                                                            torch.bfloat16)


def test_decode_plan_in_graph_mode_keeps_the_batch_size(torch):
    wrapper = _bare_decode_wrapper(_use_cuda_graph=True, _fixed_batch_size=3)
    refused(Status.INVALID_ARGUMENT, "batch size 2 is not allowed in CUDA-graph mode; allowed: 3", wrapper.plan,
            *_page_table(torch), 8, 2, 128, 16)


def test_decode_run_refuses_by_name(torch):
    planned = _bare_decode_wrapper(_planned=True, _window_left=-1, _cached_q_data_type=torch.float16)
    q = torch.zeros(2, 8, 128, dtype=torch.float16)
    cases = [
        (dict(sinks=torch.zeros(8)), Status.UNSUPPORTED, "sinks=<tensor of shape [8], torch.float32> is not "
                                                         "supported"),
        (dict(skip_softmax_threshold_scale_factor=0.1), Status.UNSUPPORTED, "skip_softmax_threshold_scale_factor="),
        (dict(kv_cache_sf=(1, 2)), Status.UNSUPPORTED, "kv_cache_sf=(1, 2) is not supported"),
        (dict(window_left=8), Status.UNSUPPORTED, "window_left=8 is not supported: it differs from plan()'s"),
        (dict(q_len_per_req=2), Status.UNSUPPORTED, "q_len_per_req=2 is not supported"),
        (dict(enable_pdl=3), Status.INVALID_ARGUMENT, "enable_pdl=3 is not allowed"),
    ]
    for kwargs, status, needle in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            refused(status, needle, planned.run, q, None, **kwargs)
    refused(Status.UNSUPPORTED, "*args: 1 extra positional argument(s)", planned.run, q, None, 1.0)
    refused(Status.NOT_PLANNED, "run() before plan()", _bare_decode_wrapper().run, q, None)
    # q's dtype is plan()'s; then q's device (no GPU here).
    refused(Status.INVALID_ARGUMENT, "q: device cpu is not allowed", planned.run, q, None)


def test_fast_decode_plan_reads_host_arrays_and_refuses_like_plan(torch):
    indptr, indices, last = _page_table(torch)
    # global_override_indptr_cpu is read instead of indptr; a wrong dtype there is refused by its name.
    refused(Status.INVALID_ARGUMENT, "global_override_indptr_cpu: dtype torch.int64 is not allowed",
            attnjit.fast_decode_plan, _bare_decode_wrapper(), indptr, indices, last, 8, 2, 128, 16,
            global_override_indptr_cpu=indptr.long())
    refused(Status.INVALID_ARGUMENT, "indices: 1 entries is not allowed; allowed: at least indptr[-1] = 3",
            attnjit.fast_decode_plan, _bare_decode_wrapper(), indptr, indices[:1], last, 8, 2, 128, 16)
    refused(Status.UNSUPPORTED, "disable_split_kv=True is not supported", attnjit.fast_decode_plan,
            _bare_decode_wrapper(), indptr, indices, last, 8, 2, 128, 16, disable_split_kv=True)


def _bare_prefill_wrapper(cls, **state):
    wrapper = object.__new__(cls)
    wrapper._use_cuda_graph, wrapper._paged = False, cls is attnjit.BatchPrefillWithPagedKVCacheWrapper
    wrapper._kv_layout = "NHD"
    for name, value in state.items():
        setattr(wrapper, name, value)
    return wrapper


@pytest.mark.parametrize("kwargs, status, needle", [
    (dict(jit_args=[1]), Status.UNSUPPORTED, "jit_args=[1] is not supported"),
    (dict(jit_kwargs={}), Status.UNSUPPORTED, "jit_kwargs={} is not supported"),
    (dict(variant_owns_mask=True), Status.UNSUPPORTED, "variant_owns_mask=True is not supported"),
    (dict(backend="cudnn"), Status.UNSUPPORTED, "backend='cudnn' is not supported"),
    (dict(kv_layout="HDN"), Status.INVALID_ARGUMENT, "kv_layout='HDN' is not a KV layout"),
    (dict(), Status.INVALID_ARGUMENT, "float_workspace_buffer: device cpu is not allowed"),
])
@pytest.mark.parametrize("cls", [attnjit.BatchPrefillWithPagedKVCacheWrapper,
                                 attnjit.BatchPrefillWithRaggedKVCacheWrapper])
def test_prefill_wrapper_constructors(torch, cls, kwargs, status, needle):
    refused(status, needle, cls, torch.zeros(16, dtype=torch.uint8), **kwargs)


def test_graph_buffers_are_refused_outside_graph_mode(torch):
    ws = torch.zeros(16, dtype=torch.uint8)
    buf = torch.zeros(4, dtype=torch.int32)
    refused(Status.INVALID_ARGUMENT, "mask_indptr_buf: is given but use_cuda_graph=False",
            attnjit.BatchPrefillWithPagedKVCacheWrapper, ws, mask_indptr_buf=buf)
    refused(Status.INVALID_ARGUMENT, "kv_indptr_buf: is given but use_cuda_graph=False",
            attnjit.BatchPrefillWithRaggedKVCacheWrapper, ws, kv_indptr_buf=buf)
    refused(Status.INVALID_ARGUMENT, "paged_kv_indices_buffer: is given but use_cuda_graph=False",
            attnjit.BatchDecodeWithPagedKVCacheWrapper, ws, paged_kv_indices_buffer=buf)
    refused(Status.INVALID_ARGUMENT, "paged_kv_last_page_len_buffer: is None but use_cuda_graph=True",
            attnjit.BatchDecodeWithPagedKVCacheWrapper, ws, use_cuda_graph=True, paged_kv_indptr_buffer=buf,
            paged_kv_indices_buffer=buf)
    refused(Status.INVALID_ARGUMENT, "paged_kv_indptr_buffer: dtype torch.int64 is not allowed",
            attnjit.BatchDecodeWithPagedKVCacheWrapper, ws, use_cuda_graph=True, paged_kv_indptr_buffer=buf.long(),
            paged_kv_indices_buffer=buf, paged_kv_last_page_len_buffer=buf)
    refused(Status.INVALID_ARGUMENT, "paged_kv_indices_buf_arr: is given but use_cuda_graph=False",
            attnjit.MultiLevelCascadeAttentionWrapper, 2, ws, paged_kv_indices_buf_arr=[buf, buf])
    refused(Status.INVALID_ARGUMENT, "qo_indptr_buf_arr: 1 entries is not allowed; allowed: a list of num_levels = 2",
            attnjit.MultiLevelCascadeAttentionWrapper, 2, ws, use_cuda_graph=True, qo_indptr_buf_arr=[buf])


@pytest.mark.parametrize("kwargs, status, needle", [
    (dict(head_dim_vo=64), Status.UNSUPPORTED, "head_dim_vo=64 is not supported"),
    (dict(use_fp16_qk_reduction=True), Status.UNSUPPORTED, "use_fp16_qk_reduction=True is not supported"),
    (dict(prefix_len_ptr="p"), Status.UNSUPPORTED, "prefix_len_ptr='p' is not supported"),
    (dict(token_pos_in_items_len=3), Status.UNSUPPORTED, "token_pos_in_items_len=3 is not supported"),
    (dict(block_tables="t"), Status.UNSUPPORTED, "block_tables='t' is not supported"),
    (dict(fixed_split_size=4096), Status.UNSUPPORTED, "fixed_split_size=4096 is not supported"),
    (dict(o_data_type="float32"), Status.UNSUPPORTED, "o_data_type=torch.float32 is not supported"),
    (dict(max_sequence_kv=20), Status.INVALID_ARGUMENT, "max_sequence_kv=20 is not allowed; allowed: >= 21"),
    (dict(max_token_per_sequence=1), Status.INVALID_ARGUMENT, "max_token_per_sequence=1 is not allowed; allowed: >= 3"),
    (dict(seq_lens_q="x"), Status.INVALID_ARGUMENT, "seq_lens_q: expected a torch.Tensor"),
    (dict(uniform_q_len=0), Status.INVALID_ARGUMENT, "uniform_q_len=0 is not allowed"),
])
def test_paged_prefill_plan_refuses_by_name(torch, kwargs, status, needle):
    wrapper = _bare_prefill_wrapper(attnjit.BatchPrefillWithPagedKVCacheWrapper)
    qo_indptr = torch.tensor([0, 3, 4], dtype=torch.int32)
    refused(status, needle, wrapper.plan, qo_indptr, *_page_table(torch), 8, 2, 128, 16, **kwargs)


def test_paged_prefill_plan_refuses_int64_index_arrays(torch):
    wrapper = _bare_prefill_wrapper(attnjit.BatchPrefillWithPagedKVCacheWrapper)
    indptr, indices, last = _page_table(torch)
    refused(Status.INVALID_ARGUMENT, "qo_indptr: dtype torch.int64 is not allowed; allowed: torch.int32",
            wrapper.plan, torch.tensor([0, 3, 4]), indptr, indices, last, 8, 2, 128, 16)
    refused(Status.INVALID_ARGUMENT, "paged_kv_indices: dtype torch.int64 is not allowed", wrapper.plan,
            torch.tensor([0, 3, 4], dtype=torch.int32), indptr, indices.long(), last, 8, 2, 128, 16)


@pytest.mark.parametrize("kwargs, status, needle", [
    (dict(v_indptr=[0, 5, 9]), Status.INVALID_ARGUMENT, "v_indptr: expected a torch.Tensor"),
    (dict(o_indptr="o"), Status.INVALID_ARGUMENT, "o_indptr: expected a torch.Tensor"),
    (dict(seq_lens=None, max_item_len_ptr="m"), Status.UNSUPPORTED, "max_item_len_ptr='m' is not supported"),
    (dict(disable_split_kv=True), Status.UNSUPPORTED, "disable_split_kv=True is not supported"),
])
def test_ragged_prefill_plan_refuses_by_name(torch, kwargs, status, needle):
    wrapper = _bare_prefill_wrapper(attnjit.BatchPrefillWithRaggedKVCacheWrapper)
    indptr = torch.tensor([0, 5, 9], dtype=torch.int32)
    refused(status, needle, wrapper.plan, indptr, indptr, 8, 2, 128, **kwargs)


def test_ragged_prefill_other_v_and_o_indptr_are_unsupported(torch):
    wrapper = _bare_prefill_wrapper(attnjit.BatchPrefillWithRaggedKVCacheWrapper)
    indptr = torch.tensor([0, 5, 9], dtype=torch.int32)
    refused(Status.UNSUPPORTED, "v_indptr other than kv_indptr is not supported", wrapper.plan, indptr, indptr, 8, 2,
            128, v_indptr=torch.tensor([0, 4, 9], dtype=torch.int32))


def test_prefill_runs_refuse_by_name(torch):
    state = dict(_planned=True, _window_left=-1, _cached_q_data_type=torch.float16, _qo_indptr_last=4)
    paged = _bare_prefill_wrapper(attnjit.BatchPrefillWithPagedKVCacheWrapper, **state)
    ragged = _bare_prefill_wrapper(attnjit.BatchPrefillWithRaggedKVCacheWrapper, **state)
    q = torch.zeros(4, 8, 128, dtype=torch.float16)
    kv = torch.zeros(3, 2, 16, 2, 128, dtype=torch.float16)
    k = torch.zeros(9, 2, 128, dtype=torch.float16)
    for kwargs, status, needle in [
        (dict(sinks=torch.zeros(8)), Status.UNSUPPORTED, "sinks="),
        (dict(use_fp16_softmax=True), Status.UNSUPPORTED, "use_fp16_softmax=True is not supported"),
        (dict(uses_spcompress=True), Status.UNSUPPORTED, "uses_spcompress=True is not supported"),
        (dict(kv_cache_sf=(1, 2)), Status.UNSUPPORTED, "kv_cache_sf=(1, 2) is not supported"),
        (dict(enable_pdl=True), Status.UNSUPPORTED, "enable_pdl=1 is not supported"),
        (dict(window_left=4), Status.UNSUPPORTED, "window_left=4 is not supported: it differs from plan()'s"),
    ]:
        refused(status, needle, paged.run, q, kv, **kwargs)
    refused(Status.UNSUPPORTED, "o_scale=2.0 is not supported", ragged.run, q, k, k, o_scale=2.0)
    refused(Status.UNSUPPORTED, "*args: 1 extra positional argument(s)", ragged.run, q, k, k, None)
    refused(Status.INVALID_ARGUMENT, "q: 3 rows is not allowed; allowed: qo_indptr[-1] = 4", paged.run, q[:3], kv)
    refused(Status.INVALID_ARGUMENT, "q: dtype torch.bfloat16 is not allowed; allowed: torch.float16", paged.run,
            q.bfloat16(), kv)
    refused(Status.INVALID_ARGUMENT, "paged_kv_cache: shape [3, 3, 16, 2, 128] is not allowed", paged.run, q,
            torch.zeros(3, 3, 16, 2, 128, dtype=torch.float16))


def test_lse_arguments(torch):
    lse = checks.Lse(torch, None, True, 4, 8, "cpu")
    assert list(lse.kernel.shape) == [4, 8]
    refused(Status.INVALID_ARGUMENT, "lse_base='e' is not allowed; allowed: 'log2', 'ln'", checks.Lse, torch, None,
            True, 4, 8, "cpu", lse_base="e")
    refused(Status.INVALID_ARGUMENT, "lse_layout='HNx' is not allowed", checks.Lse, torch, None, True, 4, 8, "cpu",
            lse_layout="HNx")
    refused(Status.INVALID_ARGUMENT, "lse: shape [8, 4] is not allowed; allowed: [4, 8]", checks.Lse, torch,
            torch.zeros(8, 4), True, 4, 8, "cpu")
    refused(Status.INVALID_ARGUMENT, "lse: dtype torch.float16 is not allowed; allowed: torch.float32", checks.Lse,
            torch, torch.zeros(4, 8, dtype=torch.float16), True, 4, 8, "cpu")
    # "HN" and "ln": the kernel's [rows, heads] base-2 lse, finished into the caller's [heads, rows] tensor.
    caller = torch.zeros(8, 4)
    request = checks.Lse(torch, caller, True, 4, 8, "cpu", lse_base="ln", lse_layout="HN")
    request.kernel.copy_(torch.arange(32, dtype=torch.float32).reshape(4, 8))
    out, got = request.finish(torch, "o")
    assert out == "o" and got is caller
    assert torch.allclose(caller, torch.arange(32, dtype=torch.float32).reshape(4, 8).t() * checks.LN2)
    # Not asked for: nothing allocated, the output alone returned.
    none = checks.Lse(torch, None, False, 4, 8, "cpu")
    assert none.kernel is None and none.finish(torch, "o") == "o"


def test_output_is_checked_and_kept(torch):
    out = torch.zeros(4, 8, 128, dtype=torch.float16)
    assert checks.output(torch, "out", out, (4, 8, 128), torch.float16, out.device) is out
    refused(Status.INVALID_ARGUMENT, "out: shape [4, 8, 128] is not allowed; allowed: [5, 8, 128]", checks.output,
            torch, "out", out, (5, 8, 128), torch.float16, out.device)
    refused(Status.INVALID_ARGUMENT, "out: dtype torch.float16 is not allowed; allowed: torch.bfloat16",
            checks.output, torch, "out", out, (4, 8, 128), torch.bfloat16, out.device)


def test_kv_cache_forms(torch):
    kv = torch.zeros(3, 2, 16, 2, 64)
    k, v = checks.kv_cache_pair(torch, "kv", kv)
    assert k is kv and v is None
    k, v = checks.kv_cache_pair(torch, "kv", kv, split=True)
    assert torch.equal(k, kv[:, 0]) and torch.equal(v, kv[:, 1])
    one = torch.zeros(3, 1, 16, 2, 64)
    k, v = checks.kv_cache_pair(torch, "kv", one)  # K and V are one tensor (FlashInfer's [pages, 1, ...])
    assert k.data_ptr() == v.data_ptr() == one.data_ptr() and k.dim() == 4
    refused(Status.INVALID_ARGUMENT, "kv: a tuple of 3 tensors is not allowed", checks.kv_cache_pair, torch, "kv",
            (kv, kv, kv))


def test_single_prefill_refuses_by_name(torch):
    q = torch.zeros(4, 8, 64, dtype=torch.float16)
    k = torch.zeros(9, 2, 64, dtype=torch.float16)
    for kwargs, status, needle in [
        (dict(scale_q=torch.ones(8)), Status.UNSUPPORTED, "scale_q=<tensor of shape [8], torch.float32> is not "
                                                          "supported"),
        (dict(kv_cache_sf=(1, 2)), Status.UNSUPPORTED, "kv_cache_sf=(1, 2) is not supported"),
        (dict(o_dtype=torch.float32), Status.UNSUPPORTED, "o_dtype=torch.float32 is not supported"),
        (dict(use_fp16_qk_reduction=True), Status.UNSUPPORTED, "use_fp16_qk_reduction=True is not supported"),
        (dict(backend="cudnn"), Status.UNSUPPORTED, "backend='cudnn' is not supported"),
        (dict(k_scale=-1.0), Status.INVALID_ARGUMENT, "k_scale=-1.0 is not allowed"),
        (dict(v_scale=torch.ones(1)), Status.UNSUPPORTED, "v_scale: a tensor scale"),
    ]:
        refused(status, needle, attnjit.single_prefill_with_kv_cache, q, k, k, **kwargs)


def test_single_prefill_fp8_refuses_by_name(torch):
    """fp8 q (FlashInfer's scale_q / scale_k / scale_v / o_dtype): what attnjit does not serve is refused
    naming the argument before any device work."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    e4m3 = torch.float8_e4m3fn
    q = torch.zeros(4, 8, 128, dtype=e4m3)
    k = torch.zeros(9, 2, 128, dtype=e4m3)
    bf16 = dict(o_dtype=torch.bfloat16)
    for args, kwargs, status, needle in [
        ((q, k, k), {}, Status.UNSUPPORTED, "o_dtype=None (q's dtype, torch.float8_e4m3fn) is not supported"),
        ((q, k, k), dict(o_dtype=e4m3), Status.UNSUPPORTED, "o_dtype=None (q's dtype"),
        ((q, k, k), dict(o_dtype=torch.float32), Status.UNSUPPORTED, "o_dtype=torch.float32 is not supported"),
        ((q, k.to(torch.bfloat16), k), bf16, Status.UNSUPPORTED, "k.dtype=torch.bfloat16 is not supported"),
        ((q.to(torch.float8_e5m2), k, k), bf16, Status.UNSUPPORTED, "q.dtype=torch.float8_e5m2 is not supported"),
        ((q[..., :64], k[..., :64], k[..., :64]), bf16, Status.UNSUPPORTED, "head_dim=64 is not supported"),
        ((q, k, k), dict(bf16, backend="fa2"), Status.UNSUPPORTED, "backend='fa2' is not supported"),
        ((q, k, k), dict(bf16, backend="fa3"), Status.UNSUPPORTED, "backend='fa3' is not supported"),
        ((q, k, k), dict(bf16, pos_encoding_mode="ROPE_LLAMA"), Status.UNSUPPORTED,
         "pos_encoding_mode='ROPE_LLAMA' is not supported"),
        ((q, k, k), dict(bf16, pos_encoding_mode="ALIBI"), Status.UNSUPPORTED,
         "pos_encoding_mode='ALIBI' is not supported"),
        ((q, k, k), dict(bf16, logits_soft_cap=30.0), Status.UNSUPPORTED, "logits_soft_cap=30.0 is not supported"),
        ((q, k, k), dict(bf16, scale_q=torch.ones(2)), Status.INVALID_ARGUMENT,
         "scale_q: shape [2] is not allowed; allowed: [8]"),
        ((q, k, k), dict(bf16, scale_k=torch.ones(8)), Status.INVALID_ARGUMENT,
         "scale_k: shape [8] is not allowed; allowed: [2]"),
        ((q, k, k), dict(bf16, scale_v=torch.ones(2, dtype=torch.float16)), Status.INVALID_ARGUMENT,
         "scale_v: dtype torch.float16 is not allowed; allowed: torch.float32"),
        ((q, k, k), dict(bf16, kv_cache_sf=(1, 2)), Status.UNSUPPORTED, "kv_cache_sf=(1, 2) is not supported"),
        ((q.to(torch.float16), k.to(torch.float16), k.to(torch.float16)), dict(scale_v=torch.ones(2)),
         Status.UNSUPPORTED, "scale_v=<tensor of shape [2], torch.float32> is not supported with q.dtype=torch.float16"),
        ((q.to(torch.float16), k.to(torch.float16), k.to(torch.float16)), bf16, Status.UNSUPPORTED,
         "o_dtype=torch.bfloat16 is not supported with q.dtype=torch.float16"),
    ]:
        refused(status, needle, attnjit.single_prefill_with_kv_cache, *args, **kwargs)


def test_ragged_plan_dtypes_take_an_fp8_output(torch):
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    e4m3 = torch.float8_e4m3fn
    assert checks.plan_dtypes(torch, e4m3, None, torch.bfloat16, fp8_q_output=True) == (e4m3, e4m3, torch.bfloat16)
    assert checks.plan_dtypes(torch, e4m3, None, None, fp8_q_output=True) == (e4m3, e4m3, e4m3)  # C refuses it
    refused(Status.UNSUPPORTED, "o_data_type=torch.bfloat16 is not supported", checks.plan_dtypes, torch,
            torch.float16, None, torch.bfloat16, fp8_q_output=True)
    refused(Status.UNSUPPORTED, "o_data_type=torch.bfloat16 is not supported", checks.plan_dtypes, torch, e4m3,
            None, torch.bfloat16)  # decode: the output is q's
    assert checks.o_dtype_code(torch, "o_dtype", torch.bfloat16, e4m3).bits == 16
    assert checks.o_dtype_code(torch, "o_dtype", torch.float16, torch.float16).bits == 0


def test_trtllm_new_arguments(torch):
    q = torch.zeros(2, 8, 128, dtype=torch.float16)
    args = dict(query=q, kv_cache=torch.zeros(10, 2, 2, 16, 128, dtype=torch.float16),
                workspace_buffer=torch.zeros(16, dtype=torch.uint8), block_tables=torch.zeros(2, 4, dtype=torch.int32),
                seq_lens=torch.ones(2, dtype=torch.int32), max_seq_len=64)
    for kwargs, status, needle in [
        (dict(enable_block_sparse_attention=True), Status.UNSUPPORTED, "enable_block_sparse_attention=True"),
        (dict(cp_world=2), Status.UNSUPPORTED, "cp_world=2 is not supported"),
        (dict(cp_rank=1), Status.UNSUPPORTED, "cp_rank=1 is not supported"),
        (dict(request_order=torch.zeros(2)), Status.UNSUPPORTED, "request_order="),
        (dict(bf16q_fp8kv_transform_mode="k_only"), Status.UNSUPPORTED, "bf16q_fp8kv_transform_mode='k_only'"),
        (dict(return_lse=2), Status.INVALID_ARGUMENT, "return_lse=2 is not allowed"),
        (dict(bmm1_scale_log2=torch.ones(2)), Status.INVALID_ARGUMENT, "bmm1_scale_log2: shape [2] is not allowed"),
        (dict(block_tables=torch.zeros(2, 4, dtype=torch.int64)), Status.INVALID_ARGUMENT,
         "block_tables: dtype torch.int64 is not allowed; allowed: torch.int32, torch.uint32"),
        (dict(seq_lens=torch.ones(2, dtype=torch.int64)), Status.INVALID_ARGUMENT,
         "seq_lens: dtype torch.int64 is not allowed"),
    ]:
        refused(status, needle, attnjit.trtllm_batch_decode_with_kv_cache, **{**args, **kwargs})
    # Accepted: get as far as the query's device (no GPU here).
    for kwargs in (dict(return_lse=True), dict(bmm1_scale_log2=torch.ones(1)), dict(multi_ctas_kv_counter_buffer=None),
                   dict(kv_cache=torch.zeros(10, 1, 2, 16, 128, dtype=torch.float16))):
        refused(Status.INVALID_ARGUMENT, "query: device cpu is not allowed", attnjit.trtllm_batch_decode_with_kv_cache,
                **{**args, **kwargs})


def test_cudnn_new_arguments(torch):
    q = torch.zeros(2, 8, 128, dtype=torch.float16)
    k = torch.zeros(10, 2, 16, 128, dtype=torch.float16)
    args = dict(max_sequence_kv=64, actual_seq_lens_kv=torch.ones(2, dtype=torch.int32),
                block_tables=torch.zeros(2, 4, dtype=torch.int32))
    refused(Status.INVALID_ARGUMENT, "q_len_per_req=0 is not allowed", attnjit.cudnn_batch_decode_with_kv_cache, q, k,
            k, 0.1, torch.zeros(16, dtype=torch.uint8), q_len_per_req=0, **args)
    refused(Status.INVALID_ARGUMENT, "window_left=-5 is not allowed", attnjit.cudnn_batch_decode_with_kv_cache, q, k,
            k, 0.1, torch.zeros(16, dtype=torch.uint8), window_left=-5, **args)
    refused(Status.INVALID_ARGUMENT, "block_tables: dtype torch.int64 is not allowed",
            attnjit.cudnn_batch_decode_with_kv_cache, q, k, k, 0.1, torch.zeros(16, dtype=torch.uint8),
            **{**args, "block_tables": torch.zeros(2, 4, dtype=torch.int64)})


def test_trtllm_mask_needs_the_library_that_computes_it(torch):
    from attnjit._library import has

    q = torch.zeros(4, 8, 128, dtype=torch.float16)
    args = dict(query=q, kv_cache=torch.zeros(10, 2, 2, 16, 128, dtype=torch.float16),
                workspace_buffer=torch.zeros(16, dtype=torch.uint8), block_tables=torch.zeros(2, 4, dtype=torch.int32),
                seq_lens=torch.ones(2, dtype=torch.int32), max_seq_len=64, q_len_per_req=2,
                mask=torch.zeros(2, 2, 2, dtype=torch.int32))
    if has("attnjit_trtllm_batch_decode_with_kv_cache_v4"):
        refused(Status.INVALID_ARGUMENT, "query: device cpu is not allowed", attnjit.trtllm_batch_decode_with_kv_cache,
                **args)
    else:
        refused(Status.UNSUPPORTED, "mask=<tensor of shape [2, 2, 2], torch.int32> is not supported by this library",
                attnjit.trtllm_batch_decode_with_kv_cache, **args)


def test_an_int_workspace_of_the_wrappers_own_grows_when_a_plan_needs_more(torch):
    from types import SimpleNamespace

    from attnjit._plan_owner import PlanOwner

    owner = PlanOwner()
    owner._int_workspace_buffer, owner._own_int_workspace, owner.device = torch.empty(8, dtype=torch.uint8), True, "cpu"
    owner._plan = SimpleNamespace(handle=None)
    adopted = []
    owner._adopt_int_workspace = lambda handle: adopted.append(owner._int_workspace_buffer.numel())

    def plan_call():
        if owner._int_workspace_buffer.numel() < 32:
            raise AttnjitError(Status.WORKSPACE_TOO_SMALL, "int_workspace_buffer: too few bytes; this plan needs 32")
        return "planned"

    assert owner._plan_with_room(torch, plan_call) == "planned"
    assert adopted == [16, 32]
    # A buffer the caller gave, or CUDA-graph mode (a graph holds the address): the library's error stands.
    owner._int_workspace_buffer = torch.empty(8, dtype=torch.uint8)
    for state in (dict(_own_int_workspace=False), dict(_own_int_workspace=True, _use_cuda_graph=True)):
        owner.__dict__.update(state)
        refused(Status.WORKSPACE_TOO_SMALL, "int_workspace_buffer", owner._plan_with_room, torch, plan_call)
    owner._plan = None  # no C plan to destroy

"""attnjit.integrations.transformers without a GPU: registration with transformers, the argument checks'
messages, the reading of transformers' prefill masks as per-request key ranges, a decode mask as the uint8
view its kernel reads, and the page tables that read K/V in place (each read back row by row on the CPU
against the tensor it pages).

Needs torch (CPU-only is enough) and transformers; skips without them. The model-level checks against
sdpa run on the GPU: test_transformers_integration.py.
"""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the transformers integration needs it")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import attnjit.integrations.transformers as tj  # noqa: E402
from attnjit.errors import Status  # noqa: E402
from refusals import refused  # noqa: E402
from attnjit.integrations.transformers import _checks, _decode_mask, _mask, _pages  # noqa: E402
from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.masking_utils import (ALL_MASK_ATTENTION_FUNCTIONS, causal_mask_function, sdpa_mask,  # noqa: E402
                                        sliding_window_causal_mask_function)


def tiny_llama(**kwargs):
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2)
    return LlamaForCausalLM(config, **kwargs).eval()


# --- registration ---

def test_register_is_idempotent_and_maps_the_mask_function():
    tj.register()
    tj.register()
    keys = AttentionInterface().valid_keys()
    assert keys.count("attnjit") == 1 and keys.count("paged|attnjit") == 1
    assert AttentionInterface()["attnjit"] is tj.attnjit_attention_forward
    assert AttentionInterface()["paged|attnjit"] is tj.attnjit_paged_attention_forward
    assert ALL_MASK_ATTENTION_FUNCTIONS["attnjit"] is sdpa_mask
    # continuous batching passes request boundaries, never a mask, to "paged|attnjit"
    assert "paged|attnjit" not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping


def test_models_take_the_backend_by_name():
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="attnjit")
    assert model.config._attn_implementation == "attnjit"
    model.set_attn_implementation("sdpa")
    model.set_attn_implementation("attnjit")
    assert model.config._attn_implementation == "attnjit"
    model.set_attn_implementation("paged|attnjit")
    assert model.config._attn_implementation == "paged|attnjit"


def test_a_float32_cpu_model_is_refused_by_name_not_run_elsewhere():
    model = tiny_llama()
    model.set_attn_implementation("attnjit")
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        refused(Status.UNSUPPORTED, "query: dtype torch.float32 is not supported", model, input_ids=ids)
        model.to(torch.bfloat16)
        refused(Status.INVALID_ARGUMENT, "query: device cpu is not allowed; allowed: a CUDA tensor", model,
                input_ids=ids)
    tj.clear_plans()


def test_training_is_refused():
    model = tiny_llama().to(torch.bfloat16)
    model.set_attn_implementation("attnjit")
    refused(Status.UNSUPPORTED, "query.requires_grad=True is not supported", model, input_ids=torch.tensor([[1, 2]]))


# --- the call's options ---

@pytest.mark.parametrize("kwargs, status, needle", [
    (dict(dropout=0.1), Status.UNSUPPORTED, "dropout=0.1 is not supported"),
    (dict(output_attentions=True), Status.UNSUPPORTED, "output_attentions=True is not supported"),
    (dict(position_bias=torch.zeros(1)), Status.UNSUPPORTED, "position_bias=<tensor of shape [1]"),
    (dict(s_aux=torch.zeros(4)), Status.UNSUPPORTED, "s_aux=<tensor of shape [4]"),
    (dict(scaling=0.0), Status.INVALID_ARGUMENT, "scaling=0.0 is not allowed"),
    (dict(scaling=float("nan")), Status.INVALID_ARGUMENT, "scaling=nan is not allowed"),
    (dict(sliding_window=0), Status.INVALID_ARGUMENT, "sliding_window=0 is not allowed"),
    (dict(sliding_window=True), Status.INVALID_ARGUMENT, "sliding_window=True is not allowed"),
    (dict(softcap=-1.0), Status.INVALID_ARGUMENT, "softcap=-1.0 is not allowed"),
])
def test_options_refused_by_name(kwargs, status, needle):
    args = dict(dropout=0.0, scaling=None, sliding_window=None, softcap=None)
    model_kwargs = {k: v for k, v in kwargs.items() if k not in args}
    args.update({k: v for k, v in kwargs.items() if k in args})
    refused(status, needle, _checks.options, args["dropout"], args["scaling"], args["sliding_window"],
            args["softcap"], 64, model_kwargs)


def test_options_accepted():
    assert _checks.options(0.0, None, None, None, 64, {"position_ids": None}) == (0.125, None, None)
    assert _checks.options(0, 0.5, 4096, 50.0, 64, {"output_attentions": False}) == (0.5, 4096, 50.0)
    assert _checks.options(0.0, 0.5, None, 0.0, 64, {})[2] is None  # a cap of 0 is no cap


def test_tensor_checks_name_the_argument():
    q = torch.zeros(1, 4, 3, 64, dtype=torch.bfloat16)
    k = torch.zeros(1, 2, 3, 64, dtype=torch.bfloat16)
    refused(Status.INVALID_ARGUMENT, "key: dtype torch.float16 is not allowed; allowed: torch.bfloat16",
            _checks.tensors, torch, q, k.half(), k, "")
    refused(Status.UNSUPPORTED, "value: head_dim 32", _checks.tensors, torch, q, k, k[..., :32], "")
    refused(Status.INVALID_ARGUMENT, "query: shape [4, 3, 64] is not allowed", _checks.tensors, torch, q[0], k, k,
            "")


def test_paged_form_refuses_standard_forwards():
    q = torch.zeros(1, 4, 3, 64, dtype=torch.bfloat16)
    refused(Status.INVALID_ARGUMENT, "cache=None is not allowed: 'paged|attnjit' serves transformers' continuous "
            "batching", tj.attnjit_paged_attention_forward, None, q, q, q, None)
    refused(Status.UNSUPPORTED, "block_table: the decode fast path", tj.attnjit_paged_attention_forward, None, q, q,
            q, None, cache=object(), block_table=torch.zeros(1))
    refused(Status.UNSUPPORTED, "attention_mask: a 4-D mask for continuous batching is not supported",
            tj.attnjit_paged_attention_forward, None, q, q, q, torch.zeros(1, 1, 3, 3), cache=object())


# --- masks ---

def left_padding_mask(lengths, q_len, kv_len, window=None):
    """transformers' own mask for left-padded requests (the one 'attnjit' gets through sdpa_mask)."""
    padding = torch.zeros(len(lengths), kv_len, dtype=torch.bool)
    for i, n in enumerate(lengths):
        padding[i, kv_len - n:] = True
    function = causal_mask_function if window is None else sliding_window_causal_mask_function(window)
    return sdpa_mask(batch_size=len(lengths), q_length=q_len, kv_length=kv_len, q_offset=kv_len - q_len,
                     mask_function=function, attention_mask=padding, allow_is_causal_skip=False)


@pytest.mark.parametrize("q_len, kv_len, window", [(12, 12, None), (1, 19, None), (12, 12, 5), (1, 19, 5),
                                                   (4, 19, 6)])
def test_left_padding_becomes_key_ranges(q_len, kv_len, window):
    lengths = [kv_len, kv_len - 3, kv_len - 7, 2]
    mask = left_padding_mask(lengths, q_len, kv_len, window)
    ranges = _mask.key_ranges(torch, mask, len(lengths), q_len, kv_len, True, window)
    assert ranges.custom is None and ranges.end == kv_len and ranges.causal and ranges.window == window
    for start, n in zip(ranges.starts, lengths):
        # the first key any row sees: the first unpadded one, or the window's start for the first row
        first_seen = kv_len - n if window is None else max(kv_len - n, kv_len - q_len - window + 1)
        assert start == first_seen


def test_the_same_mask_is_read_once_and_again_after_a_write():
    mask = left_padding_mask([8, 5], 8, 8)
    first = _mask.key_ranges(torch, mask, 2, 8, 8, True, None)
    assert _mask.key_ranges(torch, mask, 2, 8, 8, True, None) is first
    mask[1, 0, 7, 2] = True  # written in place: no longer padding + causal
    again = _mask.key_ranges(torch, mask, 2, 8, 8, True, None)
    assert again is not first and again.custom is not None


def test_other_masks_are_kept_as_custom_masks():
    causal = torch.tril(torch.ones(6, 6, dtype=torch.bool))
    packed = causal.clone()
    packed[3:, :3] = False  # two packed sequences
    mask = torch.stack([packed, causal])[:, None]
    ranges = _mask.key_ranges(torch, mask, 2, 6, 6, True, None)
    assert ranges.custom is not None and torch.equal(ranges.custom, mask[:, 0])
    assert ranges.starts == (0, 0) and ranges.end == 6 and not ranges.causal
    additive = torch.where(mask, 0.0, float("-inf"))
    assert torch.equal(_mask.key_ranges(torch, additive, 2, 6, 6, True, None).custom, mask[:, 0])
    # a request that sees no key at all has no range to plan
    empty = mask.clone()
    empty[1] = False
    assert _mask.key_ranges(torch, empty, 2, 6, 6, True, None).custom is not None


def test_no_mask_reads_as_sdpa_does():
    prefill = _mask.key_ranges(torch, None, 3, 5, 9, True, None)  # is_causal: top-left, the first q_len keys
    assert (prefill.starts, prefill.end, prefill.causal) == ((0, 0, 0), 5, True)
    decode = _mask.key_ranges(torch, None, 3, 1, 9, True, 4)
    assert (decode.starts, decode.end, decode.window) == ((0, 0, 0), 9, 4)
    bidirectional = _mask.key_ranges(torch, None, 2, 5, 5, False, None)
    assert (bidirectional.end, bidirectional.causal) == (5, False)


@pytest.mark.parametrize("mask, status, needle", [
    (torch.zeros(2, 4, 3, 5, dtype=torch.bool), Status.UNSUPPORTED, "(one mask per head) is not supported"),
    (torch.zeros(2, 1, 3, 6, dtype=torch.bool), Status.INVALID_ARGUMENT,
     "attention_mask: shape [2, 1, 3, 6] is not allowed; allowed: [2 or 1, 1, 3, 5]"),
    (torch.full((2, 1, 3, 5), -1.5), Status.UNSUPPORTED, "values other than 0 and -inf"),
    (torch.zeros(2, 1, 3, 5, dtype=torch.int64), Status.INVALID_ARGUMENT, "attention_mask: dtype torch.int64"),
    ("mask", Status.UNSUPPORTED, "attention_mask='mask' is not supported"),
])
def test_masks_refused_by_name(mask, status, needle):
    refused(status, needle, _mask.key_ranges, torch, mask, 2, 3, 5, True, None)


# --- a decode step's mask, read by the kernel (no analysis) ---

def test_a_decode_masks_keep_is_a_view_of_a_bool_mask():
    mask = left_padding_mask([7, 4, 1], 1, 7)  # [3, 1, 1, 7], as transformers builds a decode step's
    keep = _decode_mask.keep_view(torch, mask, 3)
    assert keep.dtype == torch.uint8 and keep.shape == (3, 7)
    assert keep.data_ptr() == mask.data_ptr()  # no copy, no device op
    assert torch.equal(keep.bool(), mask[:, 0, 0])
    one = mask[1:2]  # a mask of batch 1 serves every request
    broadcast = _decode_mask.keep_view(torch, one, 3)
    assert broadcast.shape == (3, 7) and broadcast.stride(0) == 0
    assert torch.equal(broadcast.bool(), one[:, 0, 0].expand(3, 7))


def test_a_decode_float_mask_reads_as_keep_and_a_bias_is_refused():
    mask = left_padding_mask([7, 4, 1], 1, 7)
    additive = torch.where(mask, 0.0, float("-inf")).to(torch.bfloat16)
    assert torch.equal(_decode_mask.keep_view(torch, additive, 3).bool(), mask[:, 0, 0])
    minimum = torch.where(mask, 0.0, torch.finfo(torch.float16).min).to(torch.float16)
    assert torch.equal(_decode_mask.keep_view(torch, minimum, 3).bool(), mask[:, 0, 0])
    bias = torch.where(mask, 0.0, -1.5)
    refused(Status.UNSUPPORTED, "an additive float mask with values other than 0 and -inf", _decode_mask.keep_view,
            torch, bias, 3)


@pytest.mark.parametrize("mask, status, needle", [
    (torch.ones(2, 1, 2, 5, dtype=torch.bool), Status.INVALID_ARGUMENT,
     "attention_mask: shape [2, 1, 2, 5] is not allowed; allowed: [2 or 1, 1, 1, 5]"),
    (torch.ones(2, 4, 1, 5, dtype=torch.bool), Status.UNSUPPORTED, "(one mask per head) is not supported"),
    (torch.ones(2, 1, 1, 5, dtype=torch.int32), Status.INVALID_ARGUMENT, "attention_mask: dtype torch.int32"),
    (torch.ones(2, 1, 1, 5, dtype=torch.bool, device="meta"), Status.INVALID_ARGUMENT,
     "attention_mask: device meta is not allowed; allowed: cpu (the query's)"),
])
def test_decode_masks_are_checked_on_the_host_by_name(mask, status, needle):
    refused(status, needle, _mask.check_mask, torch, mask, 2, 1, 5, torch.device("cpu"))


# --- page tables over the tensors as they lie ---

def read_back(view, table, request):
    """Request's keys as the kernels would read them: its pages in order, cut at the last page's length."""
    a, b = int(table.indptr[request]), int(table.indptr[request + 1])
    pages = [view[int(p)] for p in table.indices[a:b]]  # each [heads, page_size, head_dim]
    rows = torch.cat(pages, dim=1) if pages else view[:0, :, :0].reshape(view.shape[1], 0, view.shape[3])
    n = (b - a - 1) * table.page_size + int(table.last_page_len[request]) if b > a else 0
    return rows[:, :n]


def dense_cases():
    b, h, kv_len, d = 3, 2, 12, 8
    hnd = torch.randn(b, h, kv_len, d)
    nhd_storage = torch.randn(b, kv_len, h, d).transpose(1, 2)  # a projection's .view(...).transpose(1, 2)
    wide = torch.randn(b, h, kv_len + 5, d)[:, :, 5:]  # a sliding cache's slice of a longer tensor
    yield "hnd", hnd, [0, 4, 6], kv_len
    yield "hnd-no-padding", hnd, [0, 0, 0], kv_len
    yield "nhd-storage", nhd_storage, [3, 0, 9], kv_len
    yield "slice", wide, [2, 0, 0], kv_len
    yield "end-before-kv_len", hnd, [0, 2, 4], 8
    yield "one-request", torch.randn(1, h, kv_len, d), [5], kv_len
    yield "one-key", torch.randn(b, h, 1, d), [0, 0, 0], 1
    yield "expanded-batch", torch.randn(1, h, kv_len, d).expand(b, h, kv_len, d), [0, 3, 6], kv_len


@pytest.mark.parametrize("name, t, starts, end", list(dense_cases()), ids=[c[0] for c in dense_cases()])
def test_dense_tables_read_each_requests_keys_in_place(name, t, starts, end):
    key, value, rows_per_request, row_stride = _pages.dense_layout(torch, t, t)
    assert key is t  # no copy for any layout transformers hands over
    table = _pages.dense_table(torch, t.shape[2], rows_per_request, starts, end)
    for array in (table.indptr, table.indices, table.last_page_len):
        assert array.dtype == torch.int32 and array.device.type == "cpu"
    view = _pages.dense_view(torch, key, (table.page_size, table.num_pages), row_stride)
    assert view.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    for i, s in enumerate(starts):
        assert torch.equal(read_back(view, table, i), t[i, :, s:end])
    if starts == [0, 0, 0] and t.is_contiguous() and end == t.shape[2]:
        assert table.page_size == t.shape[2]  # one page per request where nothing is padded


def test_different_key_and_value_layouts_are_made_contiguous_together():
    k = torch.randn(2, 2, 6, 8)
    v = torch.randn(2, 6, 2, 8).transpose(1, 2)
    key, value, _, _ = _pages.dense_layout(torch, k, v)
    assert key.stride() == value.stride() and torch.equal(value, v)
    refused(Status.INVALID_ARGUMENT, "key: stride", _pages.dense_layout, torch, torch.randn(2, 2, 6, 8)[..., ::2], k)


def test_slot_tables_page_whole_blocks_else_single_slots():
    block, heads, d = 4, 2, 8
    cache = torch.randn(10 * block + 1, heads, d)  # a trailing slot past the last whole block
    # request 0: blocks 7, 2 (6 keys); request 1: block 5 (3 keys); request 2: nothing yet
    slots = torch.tensor([28, 29, 30, 31, 8, 9, 20, 21, 22])
    indptr = torch.tensor([0, 6, 9, 9])
    table = _pages.slot_table(torch, slots, indptr, block)
    assert table.page_size == block and table.indices.tolist() == [7, 2, 5]
    view = _pages.rows_view(torch, cache, table.page_size)
    for i in range(3):
        assert torch.equal(read_back(view, table, i), cache[slots[indptr[i]:indptr[i + 1]]].transpose(0, 1))
    scattered = torch.tensor([28, 29, 30, 31, 8, 10, 20, 21, 22])  # slot 10 breaks block 2's run
    table = _pages.slot_table(torch, scattered, indptr, block)
    assert table.page_size == 1 and table.indices.tolist() == scattered.tolist()
    view = _pages.rows_view(torch, cache, 1)
    for i in range(3):
        assert torch.equal(read_back(view, table, i), cache[scattered[indptr[i]:indptr[i + 1]]].transpose(0, 1))
    refused(Status.INVALID_ARGUMENT, "read_index: 8 slots is not allowed; allowed: cu_seq_lens_k[-1] = 9",
            _pages.slot_table, torch, slots[:8], indptr, block)


# --- what a call's arguments make of it, kept across the layers of a step ---

def test_tables_built_by_torch_ops_equal_the_list_built_ones(monkeypatch):
    for name, t, starts, end in dense_cases():
        _, _, rows_per_request, _ = _pages.dense_layout(torch, t, t)
        small = _pages.dense_table(torch, t.shape[2], rows_per_request, starts, end)
        monkeypatch.setattr(_pages, "_LIST_PAGES", 0)
        large = _pages.dense_table(torch, t.shape[2], rows_per_request, starts, end)
        monkeypatch.undo()
        for field in ("indptr", "indices", "last_page_len"):
            a, b = getattr(small, field), getattr(large, field)
            assert a.dtype == b.dtype == torch.int32 and torch.equal(a, b), (name, field)
        assert (small.page_size, small.num_pages) == (large.page_size, large.num_pages), name


def test_calls_of_one_layout_share_a_signature():
    from attnjit.integrations.transformers import _attention

    class Module:
        is_causal = True

    def tensors():
        return (torch.zeros(2, 1, 4, 8, dtype=torch.bfloat16).transpose(1, 2),
                torch.zeros(2, 2, 5, 8, dtype=torch.bfloat16), torch.zeros(2, 2, 5, 8, dtype=torch.bfloat16))

    def signature(q, k, v, mask=None, scaling=0.5, module=Module()):
        return _attention._signature(q, k, v, mask, 0.0, scaling, None, None, None, module)

    first, second = tensors(), tensors()
    assert signature(*first) == signature(*second)  # other tensors, same shapes, strides, dtypes, devices
    assert signature(*first) != signature(first[0], first[1], first[2].transpose(2, 3).contiguous().transpose(2, 3))
    assert signature(*first, scaling=1) != signature(*first, scaling=True)  # equal values, the check tells them apart
    assert signature(*first, scaling=1) != signature(*first, scaling=1.0)
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    before = signature(*first, mask=mask)
    mask[0, 0, 0, 0] = False  # written in place: read again
    assert signature(*first, mask=mask) != before
    assert signature("query", first[1], first[2]) is None  # the checks name it
    assert signature(*first, scaling=[0.5]) is None  # unhashable: the checks name it


def test_a_refused_call_is_refused_again_not_kept():
    q = torch.zeros(2, 4, 1, 8, dtype=torch.bfloat16)
    k = torch.zeros(2, 2, 5, 8, dtype=torch.bfloat16)
    for _ in range(2):
        refused(Status.INVALID_ARGUMENT, "query: device cpu is not allowed", tj.attnjit_attention_forward, None, q,
                k, k, None)
    refused(Status.UNSUPPORTED, "output_attentions=True is not supported", tj.attnjit_attention_forward, None, q, k,
            k, None, output_attentions=True)


def test_launch_descriptors_point_at_each_calls_tensor():
    from attnjit.integrations.transformers import _launch

    t = torch.zeros(3, 5, 8, dtype=torch.bfloat16)
    view = torch.zeros(4, 3, 5, 8, dtype=torch.bfloat16)[1].transpose(0, 1)  # an offset, non-contiguous view
    d = _launch.Descriptor(torch, 3, view.dtype, torch.device("cuda", 1)).set(view.shape, view.stride())
    assert list(d.dl.shape[:3]) == list(view.shape) and list(d.dl.strides[:3]) == list(view.stride())
    assert (d.dl.ndim, d.dl.dtype.code, d.dl.dtype.bits, d.dl.device.device_id) == (3, 4, 16, 1)
    for x in (view, t.transpose(0, 1)):
        assert d.point(x) == d.address and d.dl.data == x.data_ptr() and d.dl.byte_offset == 0
    d.set((3, 9, 8), (80, 8, 1))  # a new step's layout: the same descriptor, described anew
    assert list(d.dl.shape[:3]) == [3, 9, 8] and list(d.dl.strides[:3]) == [80, 8, 1]


def test_decode_layouts_describe_the_keys_as_pages_of_the_capacity():
    from attnjit.integrations.transformers import _decode_steps

    q = torch.zeros(3, 1, 8, 64, dtype=torch.bfloat16).transpose(1, 2)  # [batch, heads, 1, dim] of [b, 1, h, d]
    layout = _decode_steps.Layout(q, 2, (2 * 37 * 64, 37 * 64, 64, 1), (37 * 2 * 64, 64, 2 * 64, 1))
    at = layout.at(64)
    assert at == ((3, 8, 64), (8 * 64, 64, 1), (3, 2, 64, 64), (2 * 37 * 64, 37 * 64, 64, 1), (3, 2, 64, 64),
                  (37 * 2 * 64, 64, 2 * 64, 1))
    assert layout.at(64) is at and layout.at(128)[2] == (3, 2, 128, 64)  # one object per capacity

"""Batch decode's three Python entry points on a GPU against a float64 torch
reference: page sizes 1 and 16, GQA group 4, NHD and HND, lengths off page
boundaries and of 1, pages shuffled in memory, lse (base 2), a CUDA graph
replayed after a new plan(), TensorRT-LLM's attention sinks against a
reference with the extra logit, enable_pdl on and off giving the same
bits, and cuDNN's ragged batch_offsets_q / batch_offsets_o (rows placed
anywhere in q and out) giving the same bits as no offsets. Skips without
torch or a CUDA device.

Outputs are checked finite after the allocator's free memory was poisoned
with NaN, so an unwritten output cannot pass; tolerances as
test_single_decode.py (fp16 2e-3, bf16 1e-2 relative for o; lse absolute).
"""

import copy
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402
from attnjit import AttnjitError, Status  # noqa: E402

from paged_batch import (  # noqa: E402
    DEVICE, O_TOL, PagedBatch, check, graph_wrapper, make_q, poison, reference, sink_logits, workspace)

LENS = [1, 17, 300, 16, 64, 129]


def check_pdl_agrees(run, o_ref, lse_ref, dtype):
    """run(enable_pdl) -> (o, lse): off matches the reference; on and the default (on from sm_90, as in
    FlashInfer) give the same bits; below sm_90 on is refused by name."""
    o_off, lse_off = run(False)
    check(o_off, lse_off, o_ref, lse_ref, dtype)
    if torch.cuda.get_device_capability()[0] < 9:
        with pytest.raises(AttnjitError) as info:
            run(True)
        assert info.value.status == Status.UNSUPPORTED and "enable_pdl=true needs sm_90" in info.value.message
        return
    for pdl in (True, None):
        o, lse = run(pdl)
        assert torch.equal(o, o_off) and torch.equal(lse, lse_off)


CASES = [(ps, layout, dtype, tc) for ps in (1, 16) for layout in ("NHD", "HND")
         for dtype in (torch.float16, torch.bfloat16) for tc in (False, True)]


@pytest.mark.parametrize("page_size, layout, dtype, use_tensor_cores", CASES)
def test_wrapper(page_size, layout, dtype, use_tensor_cores):
    num_kv_heads, head_dim = 2, 128
    batch = PagedBatch(LENS, page_size, num_kv_heads, head_dim, dtype, layout, seed=page_size)
    q = make_q(len(LENS), 4 * num_kv_heads, head_dim, dtype, seed=1)
    w = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace(), kv_layout=layout,
                                                   use_tensor_cores=use_tensor_cores)
    w.plan(batch.indptr, batch.indices, batch.last_page_len, 4 * num_kv_heads, num_kv_heads, head_dim, page_size,
           q_data_type=dtype)
    o_ref, lse_ref = reference(q, batch)
    poison(q.shape, dtype)
    o, lse = w.run(q, batch.kv, return_lse=True)
    check(o, lse, o_ref, lse_ref, dtype)
    # The (k, v) tuple form reads the same cache.
    o2 = w.run(q, (batch.kv[:, 0], batch.kv[:, 1]))
    torch.cuda.synchronize()
    assert torch.equal(o, o2)


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, getattr(torch, "float8_e4m3fn", None)], ids=["bf16", "e4m3"])
def test_wrapper_enable_pdl_gives_the_same_output(kv_dtype):
    """FlashInfer's run(enable_pdl=...): on, off and the default (on from sm_90) agree bit for bit. A split
    request merges in the decode kernel; every CTA of the first wave warms its first rows from the page
    table before the PDL wait (kernels/decode_prefetch.cuh)."""
    if kv_dtype is None:
        pytest.skip("this torch has no float8_e4m3fn")
    dtype, layout, hq, hkv, d, ps = torch.bfloat16, "NHD", 32, 8, 128, 16
    lens = [300] * 24
    lens[5] = 9000
    batch = PagedBatch(lens, ps, hkv, d, dtype, layout, seed=71)
    batch.kv = batch.kv.to(kv_dtype)
    q = make_q(len(lens), hq, d, dtype, seed=9)
    w = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace(), kv_layout=layout, use_tensor_cores=True)
    w.plan(batch.indptr, batch.indices, batch.last_page_len, hq, hkv, d, ps, q_data_type=dtype, kv_data_type=kv_dtype)

    def run(enable_pdl):
        q_fresh = q + 0  # a kernel right before on the stream: with PDL the decode must still wait for it
        o, lse = w.run(q_fresh, batch.kv, return_lse=True, enable_pdl=enable_pdl)
        torch.cuda.synchronize()
        return o, lse

    as_stored = copy.copy(batch)
    as_stored.kv = batch.kv.to(dtype)  # the reference reads the cache as stored (fp8 widens exactly)
    check_pdl_agrees(run, *reference(q, as_stored), dtype)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_trtllm(page_size, layout):
    dtype, num_kv_heads, head_dim = torch.bfloat16, 2, 128
    batch = PagedBatch(LENS, page_size, num_kv_heads, head_dim, dtype, layout, seed=10 + page_size)
    q = make_q(len(LENS), 4 * num_kv_heads, head_dim, dtype, seed=2)
    sm_scale = 0.7 / math.sqrt(head_dim)
    o_ref, lse_ref = reference(q, batch, sm_scale)
    poison(q.shape, dtype)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=DEVICE)
    o = attnjit.trtllm_batch_decode_with_kv_cache(q, batch.kv, workspace(), batch.block_tables, batch.seq_lens,
                                                  max(LENS), bmm1_scale=sm_scale, kv_layout=layout, lse=lse)
    check(o, lse, o_ref, lse_ref, dtype)
    # bmm2_scale multiplies the output.
    o_half = attnjit.trtllm_batch_decode_with_kv_cache(q, batch.kv, workspace(), batch.block_tables,
                                                       batch.seq_lens, max(LENS), bmm1_scale=sm_scale,
                                                       bmm2_scale=0.5, kv_layout=layout)
    check(o_half, None, o_ref * 0.5, None, dtype)


def test_trtllm_separate_k_and_v_page_tables():
    dtype, layout, ps = torch.float16, "HND", 16
    batch = PagedBatch(LENS, ps, 2, 64, dtype, layout, seed=21)
    q = make_q(len(LENS), 8, 64, dtype, seed=3)
    o_ref, _ = reference(q, batch)
    tables = torch.stack([batch.block_tables, batch.block_tables], dim=1).contiguous()  # [B, 2, max_pages]
    o = attnjit.trtllm_batch_decode_with_kv_cache(q, (batch.kv[:, 0], batch.kv[:, 1]), workspace(), tables,
                                                  batch.seq_lens, max(LENS), bmm1_scale=1 / 8.0,
                                                  kv_layout=layout, uses_shared_paged_kv_idx=False)
    check(o, None, o_ref, None, dtype)


# With a 9000-row request the uniform split cuts requests into chunks, so the merge kernel applies the
# sinks; LENS alone exercise the decode epilogue too.
SPLIT_LENS = [9000, 1, 300, 17, 2048, 64]


@pytest.mark.parametrize("lens", [LENS, SPLIT_LENS], ids=["short", "split"])
@pytest.mark.parametrize("dtype, layout", [(torch.bfloat16, "HND"), (torch.float16, "NHD")])
def test_trtllm_sinks(lens, dtype, layout):
    num_kv_heads, head_dim, ps = 2, 128, 16
    batch = PagedBatch(lens, ps, num_kv_heads, head_dim, dtype, layout, seed=60 + len(lens))
    q = make_q(len(lens), 4 * num_kv_heads, head_dim, dtype, seed=7)
    sm_scale = 1.0 / math.sqrt(head_dim)
    sinks = sink_logits(q.shape[1])
    o_ref, lse_ref = reference(q, batch, sm_scale, sinks)
    o_plain, _ = reference(q, batch, sm_scale)
    # The sinks move the answer far past the tolerance: a binding that dropped them would fail.
    assert ((o_ref - o_plain).norm() / o_ref.norm()).item() > 10 * O_TOL[dtype]
    poison(q.shape, dtype)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=DEVICE)
    o = attnjit.trtllm_batch_decode_with_kv_cache(q, batch.kv, workspace(), batch.block_tables, batch.seq_lens,
                                                  max(lens), bmm1_scale=sm_scale, kv_layout=layout, sinks=sinks,
                                                  lse=lse)
    check(o, lse, o_ref, lse_ref, dtype)


def test_trtllm_sinks_in_other_forms_are_converted():
    # FlashInfer types sinks List[Tensor]: a one-element list of bfloat16 sinks on the host gives the same
    # bits as float32 sinks of the same values on the device.
    dtype, layout = torch.bfloat16, "HND"
    batch = PagedBatch(LENS, 16, 2, 128, dtype, layout, seed=65)
    q = make_q(len(LENS), 8, 128, dtype, seed=9)
    sinks = sink_logits(8).to(torch.bfloat16)

    def run(s):
        return attnjit.trtllm_batch_decode_with_kv_cache(q, batch.kv, workspace(), batch.block_tables,
                                                         batch.seq_lens, max(LENS), bmm1_scale=0.09,
                                                         kv_layout=layout, sinks=s)

    o32 = run(sinks.float())
    o_list = run([sinks.cpu()])
    torch.cuda.synchronize()
    assert torch.equal(o32, o_list)
    o_ref, _ = reference(q, batch, 0.09, sinks.float())
    check(o32, None, o_ref, None, dtype)


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, getattr(torch, "float8_e4m3fn", None)], ids=["bf16", "e4m3"])
def test_trtllm_enable_pdl_gives_the_same_output(kv_dtype):
    if kv_dtype is None:
        pytest.skip("this torch has no float8_e4m3fn")
    dtype, layout, hq, hkv, d = torch.bfloat16, "HND", 32, 8, 128
    lens = [300] * 24
    lens[5] = 9000  # split: the decode kernel, then the merge kernel, both launched with the attribute
    batch = PagedBatch(lens, 16, hkv, d, dtype, layout, seed=70)
    batch.kv = batch.kv.to(kv_dtype)
    q = make_q(len(lens), hq, d, dtype, seed=8)
    sm_scale = 1.0 / math.sqrt(d)
    sinks = sink_logits(hq)

    def run(enable_pdl):
        lse = torch.empty(q.shape[:2], dtype=torch.float32, device=DEVICE)
        q_fresh = q + 0  # a kernel right before on the stream: with PDL the decode must still wait for it
        o = attnjit.trtllm_batch_decode_with_kv_cache(q_fresh, batch.kv, workspace(), batch.block_tables,
                                                      batch.seq_lens, max(lens), bmm1_scale=sm_scale,
                                                      kv_layout=layout, sinks=sinks, enable_pdl=enable_pdl, lse=lse)
        torch.cuda.synchronize()
        return o, lse

    as_stored = copy.copy(batch)
    as_stored.kv = batch.kv.to(dtype)  # the reference reads the cache as stored (fp8 widens exactly)
    check_pdl_agrees(run, *reference(q, as_stored, sm_scale, sinks), dtype)


@pytest.mark.parametrize("page_size", [1, 16])
def test_cudnn(page_size):
    dtype, num_kv_heads, head_dim = torch.float16, 2, 128
    batch = PagedBatch(LENS, page_size, num_kv_heads, head_dim, dtype, "HND", seed=30 + page_size)
    q = make_q(len(LENS), 4 * num_kv_heads, head_dim, dtype, seed=4)
    scale = 1.0 / math.sqrt(head_dim)
    o_ref, _ = reference(q, batch, scale)
    poison(q.shape, dtype)
    o = attnjit.cudnn_batch_decode_with_kv_cache(
        q, batch.kv[:, 0], batch.kv[:, 1], scale, workspace(), max_sequence_kv=max(LENS),
        actual_seq_lens_kv=batch.seq_lens.view(-1, 1, 1, 1), block_tables=batch.block_tables)
    check(o, None, o_ref, None, dtype)


def _ragged_layout(order, gaps, row, unit):
    """cuDNN's ragged offsets over a flat buffer: request b's row of `row` elements at place order[b], the
    places in sequence with gaps[p] * unit unused elements before place p. Returns (offsets, stride0, size):
    stride0 (a multiple of unit) and size such that a [batch, H, D] view with strides (stride0, D, 1) spans
    the whole buffer, as a tensor FlashInfer hands over with its offsets does."""
    starts, end = [], 0
    for gap in gaps:
        end += gap * unit
        starts.append(end)
        end += row
    batch = len(order)
    stride0 = -(-(end - row) // ((batch - 1) * unit)) * unit  # ceil to a multiple of unit
    return [starts[place] for place in order], stride0, (batch - 1) * stride0 + row


def _ragged_tensor(shape, stride0, size, dtype):
    """A NaN-filled flat buffer of `size` elements and the [batch, H, D] view of it with strides (stride0, D, 1)."""
    flat = torch.full((size,), float("nan"), dtype=dtype, device=DEVICE)
    return flat, flat.as_strided(shape, (stride0, shape[2], 1))


def _cudnn_call(batch, q, scale, ws, **extra):
    o = attnjit.cudnn_batch_decode_with_kv_cache(
        q, batch.kv[:, 0], batch.kv[:, 1], scale, ws, max_sequence_kv=max(batch.lens),
        actual_seq_lens_kv=batch.seq_lens, block_tables=batch.block_tables, **extra)
    torch.cuda.synchronize()
    return o


def _assert_same(got, expected):
    assert torch.isfinite(got).all(), "rows read or written away from the offsets (NaN from the buffer's gaps)"
    diff = (got.double() - expected.double()).abs().max().item()
    assert diff <= 1e-6, f"the offsets changed the output: max difference {diff:.2e}"


def _cudnn_case(lens, dtype, batch_seed, q_seed):
    """A GQA-4 batch (2 KV heads, d 128, pages of 16, HND), its query, and the call's result without
    offsets: (batch, q, scale, ws, expected)."""
    num_kv_heads, head_dim = 2, 128
    batch = PagedBatch(lens, 16, num_kv_heads, head_dim, dtype, "HND", seed=batch_seed)
    q = make_q(len(lens), 4 * num_kv_heads, head_dim, dtype, seed=q_seed)
    scale = 1.0 / math.sqrt(head_dim)
    ws = workspace()
    return batch, q, scale, ws, _cudnn_call(batch, q, scale, ws)


# With SPLIT_LENS the long requests are cut into chunks, so the merge kernel writes those rows of out.
@pytest.mark.parametrize("lens", [LENS, SPLIT_LENS], ids=["short", "split"])
@pytest.mark.parametrize("which", ["q", "o", "both"])
def test_cudnn_batch_offsets_place_rows_anywhere(lens, which):
    dtype = torch.float16
    batch, q, scale, ws, expected = _cudnn_case(lens, dtype, 80 + len(lens), 11)  # contiguous, no offsets
    _, num_qo_heads, head_dim = q.shape
    o_ref, _ = reference(q, batch, scale)
    check(expected, None, o_ref, None, dtype)

    row = num_qo_heads * head_dim
    # Rows in a permuted order with uneven gaps, a different layout for q and for out.
    q_offsets, q_stride0, q_size = _ragged_layout([3, 0, 5, 1, 4, 2], [1, 0, 3, 2, 0, 1], row, head_dim)
    o_offsets, o_stride0, o_size = _ragged_layout([5, 2, 0, 4, 1, 3], [0, 2, 1, 0, 4, 1], row, head_dim)
    extra = {}
    if which in ("q", "both"):
        q_flat, q_in = _ragged_tensor(q.shape, q_stride0, q_size, dtype)
        for b, offset in enumerate(q_offsets):
            q_flat[offset:offset + row] = q[b].reshape(-1)
        # int64 on the host: converted to int32 on q's device, as other index tensors are.
        extra["batch_offsets_q"] = torch.tensor(q_offsets, dtype=torch.int64)
    else:
        q_in = q
    if which in ("o", "both"):
        o_flat, out = _ragged_tensor(q.shape, o_stride0, o_size, dtype)
        extra["batch_offsets_o"] = torch.tensor(o_offsets, dtype=torch.int32, device=DEVICE)
    else:
        out = torch.full_like(q, float("nan"))
    result = _cudnn_call(batch, q_in, scale, ws, out=out, **extra)
    assert result is out
    if which in ("o", "both"):
        got = torch.stack([o_flat[offset:offset + row].view(num_qo_heads, head_dim) for offset in o_offsets])
        written = torch.zeros(o_size, dtype=torch.bool, device=DEVICE)
        for offset in o_offsets:
            written[offset:offset + row] = True
        assert torch.isnan(o_flat[~written]).all(), "out was written outside the rows its offsets name"
    else:
        got = out
    _assert_same(got, expected)


@pytest.mark.parametrize("lens", [LENS, SPLIT_LENS], ids=["short", "split"])
def test_cudnn_batch_offsets_flashinfer_cumulative_form(lens):
    # FlashInfer's own tests: ragged_q = arange(0, batch_size + 1) * (num_qo_heads * head_dim), for q and out
    # alike, batch_size + 1 entries of which the first batch_size are read. The same rows as no offsets.
    batch, q, scale, ws, expected = _cudnn_case(lens, torch.bfloat16, 90 + len(lens), 12)
    _, num_qo_heads, head_dim = q.shape
    ragged = torch.arange(0, len(lens) + 1, device=DEVICE, dtype=torch.int32) * (num_qo_heads * head_dim)
    out = torch.full_like(q, float("nan"))
    result = _cudnn_call(batch, q, scale, ws, out=out, batch_offsets_q=ragged, batch_offsets_o=ragged)
    assert result is out
    _assert_same(out, expected)
    # And out allocated by the call (out=None), addressed by the offsets.
    _assert_same(_cudnn_call(batch, q, scale, ws, batch_offsets_q=ragged, batch_offsets_o=ragged), expected)


def test_cudnn_batch_offsets_of_the_paged_cache_are_refused():
    dtype = torch.float16
    batch = PagedBatch([5, 9], 16, 2, 64, dtype, "HND", seed=95)
    q = make_q(2, 8, 64, dtype, seed=13)
    offsets = torch.arange(0, 3, device=DEVICE, dtype=torch.int32) * (8 * 64)
    for name in ("batch_offsets_k", "batch_offsets_v"):
        with pytest.raises(AttnjitError) as info:
            _cudnn_call(batch, q, 0.125, workspace(), **{name: offsets})
        assert info.value.status == Status.UNSUPPORTED
        assert info.value.message.startswith(f"{name}=<tensor of shape [3], torch.int32> is not supported")
        assert "block_tables" in info.value.message
    # A wrong length of batch_offsets_q is the library's error, naming it.
    with pytest.raises(AttnjitError) as info:
        _cudnn_call(batch, q, 0.125, workspace(), batch_offsets_q=offsets[:1])
    assert info.value.status == Status.INVALID_ARGUMENT
    assert info.value.message.startswith("batch_offsets_q: shape [1] is not allowed; allowed: [batch_size] or "
                                         "[batch_size + 1]")


def test_wrapper_cuda_graph_replays_after_a_new_plan():
    dtype, layout, ps, hkv, d = torch.float16, "NHD", 16, 2, 128
    w, _ = graph_wrapper(layout, len(LENS))
    first = PagedBatch(LENS, ps, hkv, d, dtype, layout, seed=40)
    q = make_q(len(LENS), 4 * hkv, d, dtype, seed=5)
    w.plan(first.indptr, first.indices, first.last_page_len, 4 * hkv, hkv, d, ps, q_data_type=dtype)
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=DEVICE)
    kv = first.kv.clone()
    w.run(q, kv, out=out, lse=lse, return_lse=True)  # warm up outside capture (kernels load)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        w.run(q, kv, out=out, lse=lse, return_lse=True)
    # Same batch size, other lengths and pages: re-plan, copy the new cache in, replay.
    second = PagedBatch([300, 5, 1, 150, 33, 16], ps, hkv, d, dtype, layout, seed=41)
    assert second.kv.shape[0] <= kv.shape[0]  # 38 pages into the captured 39
    kv.zero_()
    kv[: second.kv.shape[0]].copy_(second.kv)
    w.plan(second.indptr, second.indices, second.last_page_len, 4 * hkv, hkv, d, ps, q_data_type=dtype)
    out.fill_(float("nan"))
    graph.replay()
    o_ref, lse_ref = reference(q, second)
    check(out, lse, o_ref, lse_ref, dtype)


def test_wrong_shapes_raise_with_the_library_message():
    dtype = torch.float16
    batch = PagedBatch([5, 9], 16, 2, 64, dtype, "NHD", seed=50)
    w = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace())
    w.plan(batch.indptr, batch.indices, batch.last_page_len, 8, 2, 64, 16, q_data_type=dtype)
    with pytest.raises(AttnjitError) as info:
        w.run(make_q(3, 8, 64, dtype, seed=6), batch.kv)  # planned for 2 requests
    assert info.value.status == Status.INVALID_ARGUMENT and "q:" in info.value.message
    with pytest.raises(AttnjitError, match="indices: page id"):
        w.run(make_q(2, 8, 64, dtype, seed=6), batch.kv[:1])  # fewer pages than the table names

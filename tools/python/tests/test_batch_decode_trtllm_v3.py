"""TensorRT-LLM batch decode's speculative decoding and device-tensor scales
from Python (attnjit_trtllm_batch_decode_with_kv_cache_v3) on a GPU against
the float64 torch reference: q_len_per_req 2-4 and per-request query lengths
(max_q_len + cum_seq_lens_q), bf16 and fp8 e4m3 KV, split requests (the merge
kernel), sinks; bmm1_scale / bmm2_scale as float32 tensors giving the same
bits as the floats on the CUDA-core path (one token per request) and the
tensor-core path (several), and a CUDA graph replaying with the value a scale
tensor holds at replay. Skips without torch or a CUDA device.
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
    DEVICE, O_TOL, PagedBatch, check, make_q, poison, reference, sink_logits, workspace)

E4M3 = getattr(torch, "float8_e4m3fn", None)
HQ, HKV, D = 8, 2, 128
SHORT = [37, 100, 21, 513]
SPLIT = [9000, 5, 300]  # the long request is cut into chunks: partial states per token, then the merge kernel


def paged(lens, kv_dtype, layout, seed):
    """The batch (its cache in kv_dtype) and a copy whose cache the reference reads: fp8 widened exactly."""
    if kv_dtype is None:
        pytest.skip("this torch has no float8_e4m3fn")
    batch = PagedBatch(lens, 16, HKV, D, torch.bfloat16, layout, seed=seed)
    batch.kv = batch.kv.to(kv_dtype)
    as_stored = copy.copy(batch)
    as_stored.kv = batch.kv.to(torch.bfloat16)
    return batch, as_stored


def run(q, batch, lse=None, **kwargs):
    return attnjit.trtllm_batch_decode_with_kv_cache(q, batch.kv, workspace(), batch.block_tables, batch.seq_lens,
                                                     max(batch.lens), kv_layout=batch.layout, lse=lse, **kwargs)


@pytest.mark.parametrize("q_len", [2, 3, 4])
@pytest.mark.parametrize("lens", [SHORT, SPLIT], ids=["short", "split"])
@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, E4M3], ids=["bf16", "e4m3"])
def test_q_len_per_req(q_len, lens, kv_dtype):
    batch, as_stored = paged(lens, kv_dtype, "HND", seed=100 + q_len)
    q = make_q(len(lens) * q_len, HQ, D, torch.bfloat16, seed=q_len)
    sm_scale = 1.0 / math.sqrt(D)
    o_ref, lse_ref = reference(q, as_stored, sm_scale, q_lens=[q_len] * len(lens))
    poison(q.shape, torch.bfloat16)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=DEVICE)
    o = run(q, batch, lse, bmm1_scale=sm_scale, q_len_per_req=q_len)
    assert o.shape == q.shape
    check(o, lse, o_ref, lse_ref, torch.bfloat16)


@pytest.mark.parametrize("lens, q_lens, sinks", [
    ([50, 2000, 17, 300], [1, 4, 2, 3], False),
    (SPLIT, [3, 1, 4], True),  # split, with sinks: the merge finds each request's tokens through cum_seq_lens_q
], ids=["short", "split-sinks"])
def test_cum_seq_lens_q(lens, q_lens, sinks):
    batch, as_stored = paged(lens, torch.bfloat16, "NHD", seed=200 + len(lens))
    q = make_q(sum(q_lens), HQ, D, torch.bfloat16, seed=20)
    sm_scale = 0.8 / math.sqrt(D)
    s = sink_logits(HQ) if sinks else None
    o_ref, lse_ref = reference(q, as_stored, sm_scale, s, q_lens=q_lens)
    cum = torch.tensor([0] + [sum(q_lens[: i + 1]) for i in range(len(q_lens))], dtype=torch.int32, device=DEVICE)
    poison(q.shape, torch.bfloat16)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=DEVICE)
    o = run(q, batch, lse, bmm1_scale=sm_scale, sinks=s, max_q_len=max(q_lens), cum_seq_lens_q=cum)
    check(o, lse, o_ref, lse_ref, torch.bfloat16)
    # An int64 cum_seq_lens_q is refused by name (FlashInfer's kernels read int32), not cast.
    with pytest.raises(AttnjitError, match="cum_seq_lens_q: dtype torch.int64 is not allowed; allowed: torch.int32"):
        run(q, batch, bmm1_scale=sm_scale, sinks=s, max_q_len=max(q_lens), cum_seq_lens_q=cum.long())


@pytest.mark.parametrize("q_len", [1, 2], ids=["cuda-cores", "tensor-cores"])
@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, E4M3], ids=["bf16", "e4m3"])
@pytest.mark.parametrize("shape", [[], [1]], ids=["scalar", "one-element"])
def test_tensor_scales_give_the_floats_bits(q_len, kv_dtype, shape):
    # One token per request runs on CUDA cores (use_tensor_cores is not FlashInfer's argument here), several
    # on tensor cores; the split request covers the partial states the merge kernel combines.
    batch, as_stored = paged(SPLIT, kv_dtype, "HND", seed=300 + q_len)
    q = make_q(len(SPLIT) * q_len, HQ, D, torch.bfloat16, seed=30)
    bmm1, bmm2 = 0.6 / math.sqrt(D), 0.75  # neither the default: a dropped scale fails the reference check

    def scalar(value):
        return torch.full(shape, value, dtype=torch.float32, device=DEVICE)

    lse_f = torch.empty(q.shape[:2], dtype=torch.float32, device=DEVICE)
    lse_t = torch.empty_like(lse_f)
    o_f = run(q, batch, lse_f, bmm1_scale=bmm1, bmm2_scale=bmm2, q_len_per_req=q_len)
    o_t = run(q, batch, lse_t, bmm1_scale=scalar(bmm1), bmm2_scale=scalar(bmm2), q_len_per_req=q_len)
    o_ref, lse_ref = reference(q, as_stored, bmm1, q_lens=[q_len] * len(SPLIT), v_scale=bmm2)
    check(o_t, lse_t, o_ref, lse_ref, torch.bfloat16)
    assert torch.equal(o_t, o_f) and torch.equal(lse_t, lse_f)
    # One of the two as a tensor, the other a float.
    o_mixed = run(q, batch, bmm1_scale=bmm1, bmm2_scale=scalar(bmm2), q_len_per_req=q_len)
    torch.cuda.synchronize()
    assert torch.equal(o_mixed, o_f)


@pytest.mark.parametrize("q_len", [1, 2], ids=["cuda-cores", "tensor-cores"])
def test_a_cuda_graph_replays_with_the_scale_tensors_value_at_replay(q_len):
    batch, as_stored = paged(SPLIT, torch.bfloat16, "HND", seed=400 + q_len)
    q = make_q(len(SPLIT) * q_len, HQ, D, torch.bfloat16, seed=40)
    q_lens = [q_len] * len(SPLIT)
    bmm1 = torch.full([1], 1.0 / math.sqrt(D), dtype=torch.float32, device=DEVICE)
    bmm2 = torch.full([], 1.0, dtype=torch.float32, device=DEVICE)
    ws, out = workspace(), torch.empty_like(q)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=DEVICE)

    def call():
        attnjit.trtllm_batch_decode_with_kv_cache(q, batch.kv, ws, batch.block_tables, batch.seq_lens,
                                                  max(SPLIT), bmm1_scale=bmm1, bmm2_scale=bmm2, out=out,
                                                  kv_layout=batch.layout, q_len_per_req=q_len, lse=lse)

    call()  # warm up outside capture (kernels load, the plan is memoized)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for s1, s2 in ((1.0 / math.sqrt(D), 1.0), (0.5 / math.sqrt(D), 0.25), (1.7 / math.sqrt(D), 3.0)):
        bmm1.fill_(s1)
        bmm2.fill_(s2)
        out.fill_(float("nan"))
        graph.replay()
        o_ref, lse_ref = reference(q, as_stored, s1, q_lens=q_lens, v_scale=s2)
        check(out, lse, o_ref, lse_ref, torch.bfloat16)


def test_the_library_names_query_rows_that_q_len_per_req_does_not_divide():
    batch, _ = paged(SHORT, torch.bfloat16, "HND", seed=500)
    q = make_q(2 * len(SHORT) + 1, HQ, D, torch.bfloat16, seed=50)
    with pytest.raises(AttnjitError) as info:
        run(q, batch, q_len_per_req=2)
    assert info.value.status == Status.INVALID_ARGUMENT
    assert "query: 9 token rows is not allowed with q_len_per_req=2" in info.value.message
    with pytest.raises(AttnjitError, match="bmm1_scale: device_type=1 \\(kDLCPU\\) is not allowed"):
        run(make_q(len(SHORT), HQ, D, torch.bfloat16, seed=51), batch, bmm1_scale=torch.ones(1))

"""What a serving engine swapping flashinfer for attnjit relies on, on a GPU against float64 references: the names
built in Python (MultiLevelCascadeAttentionWrapper, the shared-prefix wrappers, fast_decode_plan) and the
arguments honoured in Python over the C API (q_scale / k_scale / v_scale, out= and lse= written in place,
lse_base and lse_layout, forward() replacing plan()'s options, the legacy positional plan() order, data_type,
TensorRT-LLM's return_lse / bmm1_scale_log2 / one-tensor K=V cache, cuDNN's lse, q_len_per_req, window and
sinks, single decode inside CUDA-graph capture, single prefill's k_scale / v_scale).

Odd sizes throughout: GQA group 3, KV lengths off page boundaries, a request of length 1. Skips without torch
or a CUDA device.
"""

import functools
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402

from dense_reference import attention  # noqa: E402
from paged_batch import PagedBatch, check, make_q, reference, sink_logits, workspace  # noqa: E402
from paged_pool import DEVICE, PagePool, Requests, indptr  # noqa: E402

HQ, HK, D, PS = 6, 2, 128, 16  # GQA group 3
DTYPE = torch.float16
LOG2E = 1.0 / math.log(2.0)


def per_request_ref(q, q_lens, dense, causal=True, sm_scale=None, window_left=-1, v_scale=1.0):
    """o, lse of each request's consecutive query rows against dense(r), stacked."""
    outs, lses, row = [], [], 0
    for r, n in enumerate(q_lens):
        o, lse = attention(q[row:row + n], *dense(r), causal=causal, sm_scale=sm_scale, window_left=window_left,
                           v_scale=v_scale)
        outs.append(o)
        lses.append(lse)
        row += n
    return torch.cat(outs), torch.cat(lses)


# --- the cascade wrappers ---

@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_multi_level_cascade_matches_attention_over_every_level(layout):
    pool = PagePool(120, PS, HK, D, DTYPE, seed=1, layout=layout)
    shared, unique = Requests(pool, [37]), Requests(pool, [1, 18, 90])
    qo_lens = [1, 5, 33]
    q = make_q(sum(qo_lens), HQ, D, DTYPE, seed=2)
    wrapper = attnjit.MultiLevelCascadeAttentionWrapper(2, workspace(), layout)
    wrapper.plan([torch.tensor([0, sum(qo_lens)], dtype=torch.int32), indptr(qo_lens)],
                 [shared.indptr, unique.indptr], [shared.indices, unique.indices],
                 [shared.last_page_len, unique.last_page_len], HQ, HK, D, PS, causal=True, q_data_type=DTYPE)

    def dense(r):
        (k0, v0), (k1, v1) = shared.dense(0), unique.dense(r)
        return torch.cat([k0, k1]), torch.cat([v0, v1])

    o_ref, _ = per_request_ref(q, qo_lens, dense)
    check(wrapper.run(q, pool.kv), None, o_ref, None, DTYPE)
    check(wrapper.forward(q, pool.kv), None, o_ref, None, DTYPE)  # forward = run


def test_shared_prefix_decode_wrapper():
    pool = PagePool(60, PS, HK, D, DTYPE, seed=3)
    unique = Requests(pool, [1, 31, 77])
    g = torch.Generator(device=DEVICE).manual_seed(4)
    k_shared = torch.randn(50, HK, D, generator=g, device=DEVICE).to(DTYPE)
    v_shared = torch.randn(50, HK, D, generator=g, device=DEVICE).to(DTYPE)
    q = make_q(3, HQ, D, DTYPE, seed=5)
    wrapper = attnjit.BatchDecodeWithSharedPrefixPagedKVCacheWrapper(workspace(), "NHD")
    wrapper.begin_forward(*unique.table(), HQ, HK, D, PS, data_type="float16")

    def dense(r):
        k, v = unique.dense(r)
        return torch.cat([k_shared, k]), torch.cat([v_shared, v])

    o_ref, _ = per_request_ref(q, [1, 1, 1], dense)
    check(wrapper.forward(q, k_shared, v_shared, pool.kv), None, o_ref, None, DTYPE)


def test_shared_prefix_prefill_wrapper():
    pool = PagePool(60, PS, HK, D, DTYPE, seed=6)
    unique = Requests(pool, [4, 31, 77])
    qo_lens = [4, 1, 20]
    g = torch.Generator(device=DEVICE).manual_seed(7)
    k_shared = torch.randn(45, HK, D, generator=g, device=DEVICE).to(DTYPE)
    v_shared = torch.randn(45, HK, D, generator=g, device=DEVICE).to(DTYPE)
    q = make_q(sum(qo_lens), HQ, D, DTYPE, seed=8)
    wrapper = attnjit.BatchPrefillWithSharedPrefixPagedKVCacheWrapper(workspace(), "NHD")
    wrapper.begin_forward(indptr(qo_lens), *unique.table(), HQ, HK, D, PS)

    def dense(r):
        k, v = unique.dense(r)
        return torch.cat([k_shared, k]), torch.cat([v_shared, v])

    sm_scale = 0.9 / math.sqrt(D)
    o_ref, _ = per_request_ref(q, qo_lens, dense, causal=True, sm_scale=sm_scale)
    out = wrapper.forward(q, k_shared, v_shared, pool.kv, causal=True, sm_scale=sm_scale)
    check(out, None, o_ref, None, DTYPE)


# --- fast_decode_plan, as SGLang installs it ---

def test_fast_decode_plan_in_graph_mode_with_host_indptr_and_page_size_one():
    """SGLang's CUDA-graph decode: page size 1, the engine writes the page indices into the wrapper's own buffer
    and passes that whole buffer, indptr on the device and its host copy as global_override_indptr_cpu."""
    batch, max_tokens = 3, 2000
    pool = PagePool(max_tokens, 1, HK, D, DTYPE, seed=9)
    buffers = dict(paged_kv_indptr_buffer=torch.zeros(batch + 1, dtype=torch.int32, device=DEVICE),
                   paged_kv_indices_buffer=torch.zeros(max_tokens, dtype=torch.int32, device=DEVICE),
                   paged_kv_last_page_len_buffer=torch.ones(batch, dtype=torch.int32, device=DEVICE))
    wrapper = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD", use_cuda_graph=True, **buffers)
    wrapper.begin_forward = functools.partial(attnjit.fast_decode_plan, wrapper)
    q = make_q(batch, HQ, D, DTYPE, seed=10)
    for step, lens in enumerate(([1, 300, 47], [2, 301, 48])):
        pool.free = list(range(max_tokens))[::-1] if step else list(range(max_tokens))
        requests = Requests(pool, lens)
        host_indptr = requests.indptr
        wrapper._paged_kv_indptr_buf.copy_(host_indptr)  # the engine's own writes
        wrapper._paged_kv_indices_buf[:requests.indices.numel()].copy_(requests.indices)
        wrapper.begin_forward(wrapper._paged_kv_indptr_buf, wrapper._paged_kv_indices_buf,
                              wrapper._paged_kv_last_page_len_buf, HQ, HK, D, 1, data_type=DTYPE, q_data_type=DTYPE,
                              non_blocking=True, fixed_split_size=None, disable_split_kv=False,
                              global_override_indptr_cpu=host_indptr)
        o_ref, lse_ref = per_request_ref(q, [1] * batch, requests.dense, causal=False)
        o, lse = wrapper.run(q, pool.kv, return_lse=True)
        check(o, lse, o_ref, lse_ref, DTYPE)


def test_fast_decode_plan_eager_with_device_arrays():
    pool = PagePool(80, PS, HK, D, DTYPE, seed=11)
    requests = Requests(pool, [1, 17, 200])
    wrapper = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD", use_tensor_cores=True)
    attnjit.fast_decode_plan(wrapper, *(t.to(DEVICE) for t in requests.table()), HQ, HK, D, PS, q_data_type=DTYPE)
    q = make_q(3, HQ, D, DTYPE, seed=12)
    o_ref, lse_ref = per_request_ref(q, [1, 1, 1], requests.dense, causal=False)
    check(*wrapper.run(q, pool.kv, return_lse=True), o_ref, lse_ref, DTYPE)


# --- the decode wrapper's honoured arguments ---

def _decode_scene(seed, dtype=DTYPE):
    pool = PagePool(80, PS, HK, D, dtype, seed=seed)
    requests = Requests(pool, [1, 40, 129])
    return pool, requests, make_q(3, HQ, D, dtype, seed=seed + 1)


def test_decode_run_scales_and_in_place_outputs():
    pool, requests, q = _decode_scene(13)
    wrapper = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    wrapper.plan(*requests.table(), HQ, HK, D, PS, q_data_type=DTYPE)
    q_scale, k_scale, v_scale = 0.5, 1.5, 2.0
    o_ref, lse_ref = per_request_ref(q, [1, 1, 1], requests.dense, causal=False,
                                     sm_scale=q_scale * k_scale / math.sqrt(D), v_scale=v_scale)
    out = torch.full(q.shape, float("nan"), dtype=DTYPE, device=DEVICE)
    lse = torch.full(q.shape[:2], float("nan"), dtype=torch.float32, device=DEVICE)
    got_o, got_lse = wrapper.run(q, pool.kv, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, out=out, lse=lse,
                                 return_lse=True)
    assert got_o is out and got_lse is lse
    check(out, lse, o_ref, lse_ref, DTYPE)
    # lse given without return_lse is filled all the same (FlashInfer's), and run() returns o alone.
    lse2 = torch.full(q.shape[:2], float("nan"), dtype=torch.float32, device=DEVICE)
    got = wrapper.run(q, pool.kv, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, lse=lse2)
    check(got, lse2, o_ref, lse_ref, DTYPE)
    assert wrapper.run_return_lse(q, pool.kv)[1].shape == (3, HQ)


def test_decode_forward_replaces_plan_options_like_flashinfer():
    pool, requests, q = _decode_scene(15)
    wrapper = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    wrapper.plan(*requests.table(), HQ, HK, D, PS, q_data_type=DTYPE)
    # A run-time sm_scale (SGLang passes layer.scaling to forward) is folded into the logit scale.
    o_ref, lse_ref = per_request_ref(q, [1, 1, 1], requests.dense, causal=False, sm_scale=0.05)
    o, lse = wrapper.forward_return_lse(q, pool.kv, sm_scale=0.05)
    check(o, lse, o_ref, lse_ref, DTYPE)
    assert wrapper._sm_scale == 0.05
    # A soft cap differs from plan()'s: planned again, as a wrapper planned with it computes.
    capped = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    capped.plan(*requests.table(), HQ, HK, D, PS, q_data_type=DTYPE, logits_soft_cap=5.0, sm_scale=0.2)
    expected = capped.run(q, pool.kv)
    got = wrapper.forward(q, pool.kv, logits_soft_cap=5.0, sm_scale=0.2)
    torch.cuda.synchronize()
    assert wrapper._logits_soft_cap == 5.0
    assert torch.equal(got, expected)
    # plan() again: its options hold (no cap, the default scale).
    wrapper.plan(*requests.table(), HQ, HK, D, PS, q_data_type=DTYPE)
    o_ref, lse_ref = per_request_ref(q, [1, 1, 1], requests.dense, causal=False)
    check(*wrapper.run(q, pool.kv, return_lse=True), o_ref, lse_ref, DTYPE)


def test_decode_plan_legacy_positional_order_and_data_type():
    pool, requests, q = _decode_scene(17, dtype=torch.bfloat16)
    wrapper = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    with pytest.warns(DeprecationWarning):
        # pos_encoding_mode, window_left, logits_soft_cap, q_data_type, kv_data_type, o_data_type, data_type, sm_scale
        wrapper.plan(*requests.table(), HQ, HK, D, PS, "NONE", -1, None, None, None, None, torch.bfloat16, 0.07)
    assert wrapper._sm_scale == 0.07 and wrapper._cached_q_data_type == torch.bfloat16
    o_ref, lse_ref = per_request_ref(q, [1, 1, 1], requests.dense, causal=False, sm_scale=0.07)
    check(*wrapper.run(q, pool.kv, return_lse=True), o_ref, lse_ref, torch.bfloat16)
    # window_left on run(): None or plan()'s value.
    check(*wrapper.run(q, pool.kv, return_lse=True, window_left=-1), o_ref, lse_ref, torch.bfloat16)


# --- the prefill wrappers' honoured arguments ---

def test_paged_prefill_out_lse_scales_and_lse_forms():
    pool = PagePool(80, PS, HK, D, DTYPE, seed=19)
    requests = Requests(pool, [3, 1, 150])
    qo_lens = [3, 1, 70]
    q = make_q(sum(qo_lens), HQ, D, DTYPE, seed=20)
    wrapper = attnjit.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
    wrapper.plan(indptr(qo_lens), *requests.table(), HQ, HK, D, PS, causal=True, q_data_type=DTYPE)
    q_scale, k_scale, v_scale = 2.0, 0.25, 3.0
    o_ref, lse_ref = per_request_ref(q, qo_lens, requests.dense, sm_scale=q_scale * k_scale / math.sqrt(D),
                                     v_scale=v_scale)
    out = torch.empty(q.shape, dtype=DTYPE, device=DEVICE)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=DEVICE)
    got = wrapper.run(q, pool.kv, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, out=out, lse=lse,
                      return_lse=True)
    assert got[0] is out and got[1] is lse
    check(out, lse, o_ref, lse_ref, DTYPE)
    # lse in natural log, heads first, into the caller's tensor.
    lse_hn = torch.empty(HQ, q.shape[0], dtype=torch.float32, device=DEVICE)
    o, got_hn = wrapper.run(q, pool.kv, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, lse=lse_hn,
                            return_lse=True, lse_base="ln", lse_layout="HN")
    assert got_hn is lse_hn
    check(o, got_hn.t() * LOG2E, o_ref, lse_ref, DTYPE)


def test_ragged_prefill_forward_replaces_plan_options_like_sglang():
    """SGLang plans the ragged wrapper with FlashInfer's defaults (causal=False) and passes causal=True and the
    layer's scale to forward_return_lse."""
    qo_lens, kv_lens = [1, 9, 40], [1, 20, 40]
    q = make_q(sum(qo_lens), HQ, D, DTYPE, seed=21)
    k = make_q(sum(kv_lens), HK, D, DTYPE, seed=22)
    v = make_q(sum(kv_lens), HK, D, DTYPE, seed=23)
    wrapper = attnjit.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
    wrapper.begin_forward(indptr(qo_lens), indptr(kv_lens), HQ, HK, D, q_data_type=DTYPE)

    def dense(r):
        start = sum(kv_lens[:r])
        return k[start:start + kv_lens[r]], v[start:start + kv_lens[r]]

    sm_scale = 1.3 / math.sqrt(D)
    o_ref, lse_ref = per_request_ref(q, qo_lens, dense, causal=True, sm_scale=sm_scale)
    for _ in range(2):  # the second call finds the options planned already
        o, lse = wrapper.forward_return_lse(q, k, v, causal=True, sm_scale=sm_scale)
        check(o, lse, o_ref, lse_ref, DTYPE)
    o_ref, lse_ref = per_request_ref(q, qo_lens, dense, causal=False)
    out = torch.empty(q.shape, dtype=DTYPE, device=DEVICE)
    assert wrapper.forward(q, k, v) is not None and wrapper.run(q, k, v, out=out) is out
    check(out, None, o_ref, None, DTYPE)


# --- TensorRT-LLM's and cuDNN's entry points ---

def test_trtllm_return_lse_scale_log2_and_one_tensor_cache():
    batch = PagedBatch([1, 33, 300], PS, HK, D, DTYPE, "HND", seed=24)
    q = make_q(3, HQ, D, DTYPE, seed=25)
    scale = 0.7 / math.sqrt(D)
    args = (q, batch.kv, workspace(), batch.block_tables, batch.seq_lens, max(batch.lens))
    o_ref, lse_ref = reference(q, batch, scale)
    o, lse = attnjit.trtllm_batch_decode_with_kv_cache(*args, bmm1_scale=scale, return_lse=True)
    check(o, lse, o_ref, lse_ref, DTYPE)
    log2_form = torch.tensor([scale * LOG2E], dtype=torch.float32, device=DEVICE)
    o2, lse2 = attnjit.trtllm_batch_decode_with_kv_cache(*args, bmm1_scale_log2=log2_form, return_lse=True)
    check(o2, lse2, o_ref, lse_ref, DTYPE)
    # [pages, 1, ...]: K and V are one tensor.
    one = batch.kv[:, :1].contiguous()
    same = copy_with_v_as_k(batch)
    o_ref, lse_ref = reference(q, same, scale)
    o3 = attnjit.trtllm_batch_decode_with_kv_cache(q, one, workspace(), batch.block_tables, batch.seq_lens,
                                                   max(batch.lens), bmm1_scale=scale)
    check(o3, None, o_ref, None, DTYPE)


@pytest.mark.skipif(not attnjit._library.has("attnjit_trtllm_batch_decode_with_kv_cache_v4"),
                    reason="this library has no attnjit_trtllm_batch_decode_with_kv_cache_v4 (the draft-tree mask)")
def test_trtllm_draft_tree_mask():
    """mask: bit c of token t's row lets t see its request's draft token c (at position L - q_len + c); every
    token sees the keys before the draft tokens. Rows: [batch, q_len_per_req, 1] int32 (one 32-bit word)."""
    q_len, lens = 4, [4, 33, 300]
    batch = PagedBatch(lens, PS, HK, D, DTYPE, "HND", seed=40)
    q = make_q(len(lens) * q_len, HQ, D, DTYPE, seed=41)
    g = torch.Generator().manual_seed(42)
    bits = torch.rand(len(lens), q_len, q_len, generator=g) < 0.5
    bits = bits.tril() | torch.eye(q_len, dtype=torch.bool)  # a tree: each token sees itself and some before it
    words = (bits.long() << torch.arange(q_len)).sum(-1)  # [batch, q_len] 32-bit words
    mask = words.to(torch.int32)[..., None].to(DEVICE)
    o = attnjit.trtllm_batch_decode_with_kv_cache(q, batch.kv, workspace(), batch.block_tables, batch.seq_lens,
                                                  max(lens), bmm1_scale=1.0 / math.sqrt(D), q_len_per_req=q_len,
                                                  mask=mask)
    outs = []
    for r, n in enumerate(lens):
        visible = torch.ones(q_len, n, dtype=torch.bool)
        visible[:, n - q_len:] = bits[r]
        outs.append(attention(q[r * q_len:(r + 1) * q_len], *batch.dense(r), visible=visible)[0])
    check(o, None, torch.cat(outs), None, DTYPE)


def copy_with_v_as_k(batch):
    """A PagedBatch whose V is its K (for a one-tensor cache)."""
    same = PagedBatch.__new__(PagedBatch)
    same.__dict__.update(batch.__dict__)
    same.kv = batch.kv.clone()
    same.kv[:, 1] = batch.kv[:, 0]
    return same


def test_cudnn_lse_speculative_rows_window_and_sinks():
    batch = PagedBatch([2, 33, 300], PS, HK, D, DTYPE, "HND", seed=26)
    scale = 1.0 / math.sqrt(D)
    ws = workspace()
    common = dict(max_sequence_kv=max(batch.lens), actual_seq_lens_kv=batch.seq_lens,
                  block_tables=batch.block_tables)
    q = make_q(3, HQ, D, DTYPE, seed=27)
    o_ref, lse_ref = reference(q, batch, scale)
    o, lse = attnjit.cudnn_batch_decode_with_kv_cache(q, batch.kv[:, 0], batch.kv[:, 1], scale, ws, return_lse=True,
                                                      **common)
    check(o, lse, o_ref, lse_ref, DTYPE)
    # Two query rows per request, bottom-right causal.
    q2 = make_q(6, HQ, D, DTYPE, seed=28)
    o_ref, lse_ref = reference(q2, batch, scale, q_lens=[2, 2, 2])
    o, lse = attnjit.cudnn_batch_decode_with_kv_cache(q2, batch.kv[:, 0], batch.kv[:, 1], scale, ws, q_len_per_req=2,
                                                      return_lse=True, **common)
    check(o, lse, o_ref, lse_ref, DTYPE)
    # A left window of 10 keys before the query's position.
    o_ref, lse_ref = per_request_ref(q, [1, 1, 1], batch.dense, causal=True, sm_scale=scale, window_left=10)
    o, lse = attnjit.cudnn_batch_decode_with_kv_cache(q, batch.kv[:, 0], batch.kv[:, 1], scale, ws, window_left=10,
                                                      return_lse=True, **common)
    check(o, lse, o_ref, lse_ref, DTYPE)
    # Attention sinks.
    sinks = sink_logits(HQ)
    o_ref, _ = reference(q, batch, scale, sinks)
    o = attnjit.cudnn_batch_decode_with_kv_cache(q, batch.kv[:, 0], batch.kv[:, 1], scale, ws, sinks=sinks, **common)
    check(o, None, o_ref, None, DTYPE)


# --- the one-call entry points ---

def test_single_decode_inside_cuda_graph_capture():
    """After a call outside capture (the kernels compile), the call records into a CUDA graph: its scratch comes
    from torch's allocator on the capturing stream, and the replay reads the inputs' new values."""
    kv_len = 9000  # long enough for the plan to split the KV (a workspace is needed)
    g = torch.Generator(device=DEVICE).manual_seed(29)
    k = torch.randn(kv_len, HK, D, generator=g, device=DEVICE).to(DTYPE)
    v = torch.randn(kv_len, HK, D, generator=g, device=DEVICE).to(DTYPE)
    q = torch.randn(HQ, D, generator=g, device=DEVICE).to(DTYPE)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        attnjit.single_decode_with_kv_cache(q, k, v, return_lse=True)  # warm-up: compiles and loads the kernels
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = attnjit.single_decode_with_kv_cache(q, k, v, return_lse=True)
    for seed in (30, 31):
        q.copy_(torch.randn(HQ, D, generator=torch.Generator(device=DEVICE).manual_seed(seed),
                            device=DEVICE).to(DTYPE))
        graph.replay()
        o_ref, lse_ref = attention(q[None], k, v)
        check(o[None], lse[None], o_ref, lse_ref, DTYPE)


def test_single_prefill_k_scale_and_v_scale():
    g = torch.Generator(device=DEVICE).manual_seed(32)
    q = torch.randn(37, HQ, D, generator=g, device=DEVICE).to(DTYPE)
    k = torch.randn(101, HK, D, generator=g, device=DEVICE).to(DTYPE)
    v = torch.randn(101, HK, D, generator=g, device=DEVICE).to(DTYPE)
    o_ref, lse_ref = attention(q, k, v, causal=True, sm_scale=0.5 / math.sqrt(D), v_scale=2.5)
    o, lse = attnjit.single_prefill_with_kv_cache_return_lse(q, k, v, causal=True, k_scale=0.5, v_scale=2.5)
    check(o, lse, o_ref, lse_ref, DTYPE)
    o2 = attnjit.single_prefill_with_kv_cache(q, k, v, causal=True, k_scale=0.5, v_scale=2.5)
    check(o2, None, o_ref, None, DTYPE)

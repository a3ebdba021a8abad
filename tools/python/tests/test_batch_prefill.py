"""The spec's paged and ragged batch prefill examples, as written, on a GPU.

Skips without torch and a CUDA device. Checks the spec's own assertion (a
custom mask equal to the causal mask gives the causal output within 1e-3)
and compares each request with a float64 reference.
"""

import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

import attnjit  # noqa: E402


def reference(q, k, v, causal):
    qo, h, d = q.shape
    kv, hk, _ = k.shape
    g = h // hk
    s = torch.einsum("qhd,khd->hqk", q.double(), k.double().repeat_interleave(g, 1)) / math.sqrt(d)
    if causal:
        pos = torch.arange(qo, device=q.device)[:, None] + (kv - qo)
        s = s.masked_fill(~(torch.arange(kv, device=q.device)[None, :] <= pos)[None], float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v.double().repeat_interleave(g, 1))


def test_paged_example_from_the_spec():
    num_layers, num_qo_heads, num_kv_heads, head_dim, max_num_pages, page_size = 4, 64, 16, 128, 128, 16
    workspace_buffer = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device="cuda:0")
    prefill_wrapper = attnjit.BatchPrefillWithPagedKVCacheWrapper(workspace_buffer, "NHD")
    batch_size, nnz_qo = 7, 100
    qo_indptr = torch.tensor([0, 33, 44, 55, 66, 77, 88, nnz_qo], dtype=torch.int32, device="cuda:0")
    paged_kv_indices = torch.arange(max_num_pages).int().to("cuda:0")
    paged_kv_indptr = torch.tensor([0, 17, 29, 44, 48, 66, 100, 128], dtype=torch.int32, device="cuda:0")
    paged_kv_last_page_len = torch.tensor([1, 7, 14, 4, 3, 1, 16], dtype=torch.int32, device="cuda:0")
    q_at_layer = torch.randn(num_layers, nnz_qo, num_qo_heads, head_dim).half().to("cuda:0")
    kv_cache_at_layer = torch.randn(num_layers, max_num_pages, 2, page_size, num_kv_heads, head_dim,
                                    dtype=torch.float16, device="cuda:0")
    prefill_wrapper.plan(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
                         num_kv_heads, head_dim, page_size, causal=True)
    outputs = [prefill_wrapper.run(q_at_layer[i], kv_cache_at_layer[i]) for i in range(num_layers)]
    assert outputs[0].shape == torch.Size([100, 64, 128])

    qo_len = (qo_indptr[1:] - qo_indptr[:-1]).cpu().tolist()
    kv_len = (page_size * (paged_kv_indptr[1:] - paged_kv_indptr[:-1] - 1) + paged_kv_last_page_len).cpu().tolist()
    # Reference for layer 0, request by request (pages are in order: indices = arange).
    kc = kv_cache_at_layer[0]
    for b in range(batch_size):
        pages = kc[paged_kv_indptr[b]:paged_kv_indptr[b + 1]]
        k = pages[:, 0].reshape(-1, num_kv_heads, head_dim)[:kv_len[b]]
        v = pages[:, 1].reshape(-1, num_kv_heads, head_dim)[:kv_len[b]]
        q = q_at_layer[0][qo_indptr[b]:qo_indptr[b + 1]]
        ref = reference(q, k, v, True)
        got = outputs[0][qo_indptr[b]:qo_indptr[b + 1]].double()
        assert ((got - ref).norm() / ref.norm()).item() <= 2e-3

    mask_arr = []
    for i in range(batch_size):
        mask_i = torch.tril(torch.full((qo_len[i], kv_len[i]), True, device="cuda:0"), diagonal=(kv_len[i] - qo_len[i]))
        mask_arr.append(mask_i.flatten())
    mask = torch.cat(mask_arr, dim=0)
    prefill_wrapper.plan(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
                         num_kv_heads, head_dim, page_size, custom_mask=mask)
    for i in range(num_layers):
        o_custom = prefill_wrapper.run(q_at_layer[i], kv_cache_at_layer[i])
        assert torch.allclose(o_custom, outputs[i], rtol=1e-3, atol=1e-3)


def test_ragged_example_shape():
    num_qo_heads, num_kv_heads, head_dim = 64, 16, 128
    workspace_buffer = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device="cuda:0")
    wrapper = attnjit.BatchPrefillWithRaggedKVCacheWrapper(workspace_buffer, "NHD")
    qo_indptr = torch.tensor([0, 33, 44, 55, 66, 77, 88, 100], dtype=torch.int32, device="cuda:0")
    kv_indptr = qo_indptr.clone()
    q = torch.randn(100, num_qo_heads, head_dim).half().to("cuda:0")
    k = torch.randn(100, num_kv_heads, head_dim).half().to("cuda:0")
    v = torch.randn(100, num_kv_heads, head_dim).half().to("cuda:0")
    wrapper.plan(qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim, causal=True)
    o = wrapper.run(q, k, v)
    assert o.shape == torch.Size([100, 64, 128])
    for b in range(7):
        s, e = qo_indptr[b].item(), qo_indptr[b + 1].item()
        ref = reference(q[s:e], k[s:e], v[s:e], True)
        assert ((o[s:e].double() - ref).norm() / ref.norm()).item() <= 2e-3


def _paged_lengths(qo_lens, kv_lens, page_size, pages_in_pool, gen):
    """Index arrays for requests over a pool of pages, drawn at random."""
    ids = torch.randperm(pages_in_pool, generator=gen)
    qo_indptr, kv_indptr, last, used = [0], [0], [], 0
    for qo, kv in zip(qo_lens, kv_lens):
        pages = -(-kv // page_size)
        qo_indptr.append(qo_indptr[-1] + qo)
        kv_indptr.append(kv_indptr[-1] + pages)
        last.append(kv - (pages - 1) * page_size if pages else 0)
        used += pages
    as_i32 = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    return as_i32(qo_indptr), as_i32(kv_indptr), ids[:used].int(), as_i32(last)


def _check_paged(out, q, cache, qo_indptr, kv_indptr, ids, last, page_size, k_scale=1.0, v_scale=1.0, tol=1e-2):
    for b in range(len(last)):
        pages = cache[ids[kv_indptr[b]:kv_indptr[b + 1]].long().cuda()]
        kv = (int(kv_indptr[b + 1] - kv_indptr[b]) - 1) * page_size + int(last[b])
        k = pages[:, 0].reshape(-1, *pages.shape[-2:])[:kv].double() * k_scale
        v = pages[:, 1].reshape(-1, *pages.shape[-2:])[:kv].double() * v_scale
        ref = reference(q[qo_indptr[b]:qo_indptr[b + 1]], k, v, True)
        got = out[qo_indptr[b]:qo_indptr[b + 1]].double()
        assert ((got - ref).norm() / ref.norm()).item() <= tol, f"request {b}"


def test_paged_cuda_graph_replays_after_a_new_plan():
    """use_cuda_graph=True with FlashInfer's buffers: one captured run serves later plans (a smaller batch too)."""
    hq, hk, d, page_size, pool_pages, max_batch, max_rows = 12, 4, 128, 16, 256, 3, 300
    gen = torch.Generator().manual_seed(0)
    ws = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
    bufs = dict(qo_indptr_buf=torch.empty(max_batch + 1, dtype=torch.int32, device="cuda"),
                paged_kv_indptr_buf=torch.empty(max_batch + 1, dtype=torch.int32, device="cuda"),
                paged_kv_indices_buf=torch.empty(pool_pages, dtype=torch.int32, device="cuda"),
                paged_kv_last_page_len_buf=torch.empty(max_batch, dtype=torch.int32, device="cuda"))
    w = attnjit.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", use_cuda_graph=True, **bufs)
    assert w.is_cuda_graph_enabled
    q = torch.randn(max_rows, hq, d, dtype=torch.bfloat16, device="cuda")
    cache = torch.randn(pool_pages, 2, page_size, hk, d, dtype=torch.bfloat16, device="cuda")
    plans = [([5, 100, 1], [3000, 100, 17]), ([37, 2], [40, 1000]), ([64, 64, 64], [64, 1000, 2000])]

    def plan(qo_lens, kv_lens):
        arrays = _paged_lengths(qo_lens, kv_lens, page_size, pool_pages, gen)
        w.plan(*arrays, hq, hk, d, page_size, causal=True, q_data_type=torch.bfloat16)
        return arrays

    arrays = plan(*plans[0])
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        w.run(q, cache)  # warm-up outside the capture (torch's allocator)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = w.run(q, cache)
    for i, lens in enumerate(plans):
        if i:
            arrays = plan(*lens)
        graph.replay()
        torch.cuda.synchronize()
        _check_paged(out, q, cache, *arrays, page_size)


def test_paged_fp8_kv_with_scales():
    """run(k_scale, v_scale) calibrates an fp8 e4m3 cache."""
    hq, hk, d, page_size, pool_pages = 8, 2, 128, 16, 64
    gen = torch.Generator().manual_seed(1)
    ws = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
    w = attnjit.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
    arrays = _paged_lengths([7, 33], [300, 33], page_size, pool_pages, gen)
    w.plan(*arrays, hq, hk, d, page_size, causal=True, q_data_type=torch.bfloat16, kv_data_type=torch.float8_e4m3fn)
    q = torch.randn(int(arrays[0][-1]), hq, d, dtype=torch.bfloat16, device="cuda")
    cache = torch.randn(pool_pages, 2, page_size, hk, d, device="cuda").to(torch.float8_e4m3fn)
    out = w.run(q, cache, k_scale=0.5, v_scale=2.0)
    _check_paged(out, q, cache.float(), *arrays, page_size, k_scale=0.5, v_scale=2.0)
    with pytest.raises(attnjit.AttnjitError, match="k_scale=-1"):
        w.run(q, cache, k_scale=-1.0)

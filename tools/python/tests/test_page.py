"""attnjit.page on a GPU against a torch reference of FlashInfer's semantics: append_paged_kv_cache for
16-bit and fp8 caches, NHD and HND, page sizes 5 and 16 (1 too, FlashInfer's 3-D/4-D caches), the 5-D
cache and the (k_cache, v_cache) tuple, K/V as slices of a packed QKV tensor, a request appending nothing,
rows outside the tables skipped; get_batch_indices_positions (FlashInfer's docstring example, empty
requests, entries no request covers, given output tensors); get_seq_lens; and the two kernels captured in a
CUDA graph, replayed on new tables. The comparison is exact: the append copies bytes. Skips without torch
or a CUDA device.
"""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

from attnjit import AttnjitError, Status, check_tables  # noqa: E402
from attnjit.page import append_paged_kv_cache, get_batch_indices_positions, get_seq_lens  # noqa: E402

DEVICE = "cuda"
DTYPES = [torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2]


def _bytes(t):
    """A tensor's elements as raw bytes (exact comparison; fp8 has no == on every torch)."""
    return t.contiguous().view(torch.uint8)


def _random(shape, dtype, gen):
    return (torch.randn(*shape, generator=gen, device=DEVICE) * 3).to(dtype)


def _tables(before, appended, page_size, gen):
    """FlashInfer's tables for requests of before[b] + appended[b] rows on pages drawn at random, and the
    appended rows' (batch_indices, positions); int32 on the GPU."""
    lengths = [b + a for b, a in zip(before, appended)]
    pages = [(n + page_size - 1) // page_size for n in lengths]
    indptr = [0]
    for p in pages:
        indptr.append(indptr[-1] + p)
    last = [n - (p - 1) * page_size if p else 0 for n, p in zip(lengths, pages)]
    num_pages = indptr[-1] + 3
    ids = torch.randperm(num_pages, generator=torch.Generator().manual_seed(int(gen.initial_seed())))[:indptr[-1]]
    rows_b = [b for b, a in enumerate(appended) for _ in range(a)]
    rows_p = [before[b] + r for b, a in enumerate(appended) for r in range(a)]
    i32 = dict(dtype=torch.int32, device=DEVICE)
    return dict(kv_indices=ids.to(**i32), kv_indptr=torch.tensor(indptr, **i32),
                kv_last_page_len=torch.tensor(last, **i32), batch_indices=torch.tensor(rows_b, **i32),
                positions=torch.tensor(rows_p, **i32), num_pages=num_pages)


def _reference(k, v, t, k_cache, v_cache, page_size, layout):
    """FlashInfer's append on byte views: the rows the tables put inside the cache."""
    kc, vc = _bytes(k_cache).clone(), _bytes(v_cache).clone()
    bi, pos = t["batch_indices"].long(), t["positions"].long()
    indptr, last, ids = t["kv_indptr"].long(), t["kv_last_page_len"].long(), t["kv_indices"].long()
    batch = last.shape[0]
    ok = (bi >= 0) & (bi < batch) & (pos >= 0)
    b = bi.clamp(0, max(batch - 1, 0))
    n_pages = indptr[b + 1] - indptr[b]
    ok &= (pos < (n_pages - 1) * page_size + last[b]) & (pos // page_size < n_pages)
    at = indptr[b] + pos // page_size
    ok &= (at >= 0) & (at < ids.shape[0])
    page = ids[at.clamp(0, max(ids.shape[0] - 1, 0))] if ids.shape[0] else torch.zeros_like(at)
    ok &= (page >= 0) & (page < k_cache.shape[0])
    rows = ok.nonzero().flatten()
    page, slot = page[rows], (pos % page_size)[rows]
    kb, vb = _bytes(k)[rows], _bytes(v)[rows]
    if layout == "NHD":
        kc[page, slot], vc[page, slot] = kb, vb
    else:
        kc[page, :, slot], vc[page, :, slot] = kb, vb
    return kc, vc


def _cache(num_pages, page_size, heads, head_dim, dtype, layout, form, gen):
    """The cache in the form FlashInfer takes, and its K and V views."""
    inner = [page_size, heads, head_dim] if layout == "NHD" else [heads, page_size, head_dim]
    if form == "5d":
        cache = _random([num_pages, 2] + inner, dtype, gen)
        return cache, cache[:, 0], cache[:, 1]
    k, v = _random([num_pages] + inner, dtype, gen), _random([num_pages] + inner, dtype, gen)
    return (k, v), k, v


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("page_size", [5, 16])
@pytest.mark.parametrize("form", ["5d", "tuple"])
def test_append_matches_flashinfers_semantics(dtype, layout, page_size, form):
    gen = torch.Generator(device=DEVICE).manual_seed(page_size * 7 + len(layout))
    heads, head_dim = 4, 128
    before, appended = [5, 0, 16, 31, 2], [3, 0, 17, 1, 40]  # an empty request, partly full last pages
    t = _tables(before, appended, page_size, gen)
    nnz = sum(appended)
    k, v = _random([nnz, heads, head_dim], dtype, gen), _random([nnz, heads, head_dim], dtype, gen)
    paged, k_cache, v_cache = _cache(t["num_pages"], page_size, heads, head_dim, dtype, layout, form, gen)
    want_k, want_v = _reference(k, v, t, k_cache, v_cache, page_size, layout)
    append_paged_kv_cache(k, v, t["batch_indices"], t["positions"], paged, t["kv_indices"], t["kv_indptr"],
                          t["kv_last_page_len"], layout)
    torch.cuda.synchronize()
    assert torch.equal(_bytes(k_cache), want_k)
    assert torch.equal(_bytes(v_cache), want_v)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_append_from_packed_qkv_slices_and_one_row(layout):
    gen = torch.Generator(device=DEVICE).manual_seed(3)
    heads, head_dim, page_size = 2, 64, 16
    for before, appended in (([7, 1], [9, 30]), ([37], [1])):
        t = _tables(before, appended, page_size, gen)
        nnz = sum(appended)
        qkv = _random([nnz, 3, heads, head_dim], torch.bfloat16, gen)
        k, v = qkv[:, 1], qkv[:, 2]  # rows 3 * heads * head_dim apart
        paged, k_cache, v_cache = _cache(t["num_pages"], page_size, heads, head_dim, torch.bfloat16, layout, "5d",
                                         gen)
        want_k, want_v = _reference(k, v, t, k_cache, v_cache, page_size, layout)
        append_paged_kv_cache(k, v, t["batch_indices"], t["positions"], paged, t["kv_indices"], t["kv_indptr"],
                              t["kv_last_page_len"], kv_layout=layout)
        torch.cuda.synchronize()
        assert torch.equal(_bytes(k_cache), want_k)
        assert torch.equal(_bytes(v_cache), want_v)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("form", ["5d", "tuple"])
def test_append_to_page_size_one_caches_one_dimension_short(layout, form):
    """FlashInfer reads a 4-D (5-D form) or 3-D (tuple) cache as page_size 1."""
    gen = torch.Generator(device=DEVICE).manual_seed(11)
    heads, head_dim = 3, 64
    t = _tables([2, 0], [3, 4], 1, gen)
    k, v = _random([7, heads, head_dim], torch.float16, gen), _random([7, heads, head_dim], torch.float16, gen)
    if form == "5d":
        paged = _random([t["num_pages"], 2, heads, head_dim], torch.float16, gen)
        k_cache, v_cache = paged[:, 0], paged[:, 1]
    else:
        paged = (_random([t["num_pages"], heads, head_dim], torch.float16, gen),
                 _random([t["num_pages"], heads, head_dim], torch.float16, gen))
        k_cache, v_cache = paged
    expand = (lambda x: x.unsqueeze(-3)) if layout == "NHD" else (lambda x: x.unsqueeze(-2))
    want_k, want_v = _reference(k, v, t, expand(k_cache), expand(v_cache), 1, layout)
    append_paged_kv_cache(k, v, t["batch_indices"], t["positions"], paged, t["kv_indices"], t["kv_indptr"],
                          t["kv_last_page_len"], layout)
    torch.cuda.synchronize()
    assert torch.equal(_bytes(expand(k_cache)), want_k)
    assert torch.equal(_bytes(expand(v_cache)), want_v)


def test_rows_outside_the_tables_are_skipped():
    gen = torch.Generator(device=DEVICE).manual_seed(5)
    page_size, heads, head_dim = 5, 2, 64
    t = _tables([3, 10], [4, 5], page_size, gen)
    # Request -1 and 2 (of 2), a negative position, one in the slack of request 0's last page, one past
    # request 1's pages.
    extra_b = torch.tensor([-1, 2, 0, 0, 1], dtype=torch.int32, device=DEVICE)
    extra_p = torch.tensor([0, 0, -3, 7, 15], dtype=torch.int32, device=DEVICE)
    t["batch_indices"] = torch.cat([t["batch_indices"], extra_b])
    t["positions"] = torch.cat([t["positions"], extra_p])
    nnz = t["batch_indices"].shape[0]
    k, v = _random([nnz, heads, head_dim], torch.bfloat16, gen), _random([nnz, heads, head_dim], torch.bfloat16, gen)
    paged, k_cache, v_cache = _cache(t["num_pages"], page_size, heads, head_dim, torch.bfloat16, "NHD", "5d", gen)
    want_k, want_v = _reference(k, v, t, k_cache, v_cache, page_size, "NHD")
    append_paged_kv_cache(k, v, t["batch_indices"], t["positions"], paged, t["kv_indices"], t["kv_indptr"],
                          t["kv_last_page_len"])
    torch.cuda.synchronize()
    assert torch.equal(_bytes(k_cache), want_k)
    assert torch.equal(_bytes(v_cache), want_v)
    # The skipped rows are reported once (by the next append on the device, or check_tables), then nothing.
    with pytest.raises(AttnjitError) as caught:
        check_tables(DEVICE)
    assert caught.value.status == Status.INVALID_ARGUMENT and "is not allowed" in caught.value.message
    check_tables(DEVICE)


def test_the_flashinfer_docstring_example():
    nnz_kv, num_kv_heads, head_dim = 100, 32, 128
    k_append = torch.randn(nnz_kv, num_kv_heads, head_dim).half().to(0)
    v_append = torch.randn(nnz_kv, num_kv_heads, head_dim).half().to(0)
    kv_append_length = torch.tensor([45, 8, 25, 22], dtype=torch.int32, device="cuda:0")
    kv_append_indptr = torch.cat([torch.zeros(1).int().to(0), torch.cumsum(kv_append_length, dim=0)]).int()
    max_num_pages, page_size = 1000, 16
    paged_kv_cache = torch.randn(max_num_pages, 2, page_size, num_kv_heads, head_dim).half().to(0)
    num_pages_per_req = torch.tensor([3, 1, 2, 2], dtype=torch.int32, device="cuda:0")
    kv_page_indptr = torch.cat([torch.zeros(1).int().to(0), torch.cumsum(num_pages_per_req, dim=0)]).int()
    kv_page_indices = torch.arange(8, dtype=torch.int32, device="cuda:0")
    kv_last_page_len = torch.tensor([13, 8, 9, 6], dtype=torch.int32, device="cuda:0")
    seq_lens = get_seq_lens(kv_page_indptr, kv_last_page_len, page_size)
    assert seq_lens.tolist() == [45, 8, 25, 22]
    batch_indices, positions = get_batch_indices_positions(kv_append_indptr, seq_lens, nnz_kv)
    assert batch_indices.tolist() == [0] * 45 + [1] * 8 + [2] * 25 + [3] * 22
    assert positions.tolist() == list(range(45)) + list(range(8)) + list(range(25)) + list(range(22))
    before = paged_kv_cache.clone()
    append_paged_kv_cache(k_append, v_append, batch_indices, positions, paged_kv_cache, kv_page_indices,
                          kv_page_indptr, kv_last_page_len)
    t = dict(batch_indices=batch_indices, positions=positions, kv_indices=kv_page_indices, kv_indptr=kv_page_indptr,
             kv_last_page_len=kv_last_page_len)
    want_k, want_v = _reference(k_append, v_append, t, before[:, 0], before[:, 1], page_size, "NHD")
    assert torch.equal(_bytes(paged_kv_cache[:, 0]), want_k)
    assert torch.equal(_bytes(paged_kv_cache[:, 1]), want_v)


def _positions_reference(indptr, seq_lens, nnz, positions):
    bi = [-1] * nnz
    pos = list(positions)
    for b in range(len(indptr) - 1):
        for j in range(indptr[b], indptr[b + 1]):
            if 0 <= j < nnz:
                bi[j], pos[j] = b, j + seq_lens[b] - indptr[b + 1]
    return bi, pos


@pytest.mark.parametrize("indptr,seq_lens,nnz", [
    ([0, 1, 3, 6, 10], [5, 5, 5, 5], 10),             # FlashInfer's docstring
    ([0, 0, 4, 4, 4, 9, 9], [3, 7, 0, 2, 100, 5], 9),  # empty requests
    ([0, 2, 5], [2, 8], 8),                            # entries past the last request
    ([2, 3, 6], [4, 3], 6),                            # entries before the first
    ([0, 3, 12], [3, 20], 6),                          # an indptr past nnz
    ([0], [], 3),                                      # no requests
])
def test_batch_indices_positions(indptr, seq_lens, nnz):
    i32 = dict(dtype=torch.int32, device=DEVICE)
    a, s = torch.tensor(indptr, **i32), torch.tensor(seq_lens, **i32)
    bi, pos = get_batch_indices_positions(a, s, nnz)
    assert (bi.dtype, pos.dtype, tuple(bi.shape), tuple(pos.shape)) == (torch.int32, torch.int32, (nnz,), (nnz,))
    want_bi, want_pos = _positions_reference(indptr, seq_lens, nnz, [0] * nnz)
    assert bi.tolist() == want_bi and pos.tolist() == want_pos
    # Given outputs: batch_indices overwritten everywhere, positions kept where no request writes.
    out_bi = torch.full((nnz,), 77, **i32)
    out_pos = torch.arange(100, 100 + nnz, **i32)
    r_bi, r_pos = get_batch_indices_positions(a, s, nnz, batch_indices=out_bi, positions=out_pos)
    assert r_bi is out_bi and r_pos is out_pos
    want_bi, want_pos = _positions_reference(indptr, seq_lens, nnz, list(range(100, 100 + nnz)))
    assert out_bi.tolist() == want_bi and out_pos.tolist() == want_pos


def test_get_seq_lens_is_flashinfers_arithmetic():
    indptr = torch.tensor([0, 3, 3, 4, 9], dtype=torch.int32, device=DEVICE)
    last = torch.tensor([2, 0, 16, 7], dtype=torch.int32, device=DEVICE)
    assert get_seq_lens(indptr, last, 16).tolist() == [2 * 16 + 2, 0, 16, 4 * 16 + 7]


def test_refusals_name_the_argument():
    i32 = dict(dtype=torch.int32, device=DEVICE)
    k = torch.zeros(4, 2, 64, dtype=torch.bfloat16, device=DEVICE)
    cache = torch.zeros(3, 2, 16, 2, 64, dtype=torch.bfloat16, device=DEVICE)
    idx = torch.zeros(4, **i32)
    with pytest.raises(AttnjitError) as info:
        append_paged_kv_cache(k, k, idx.long(), idx, cache, torch.zeros(3, **i32), torch.tensor([0, 3], **i32),
                              torch.tensor([4], **i32))
    assert info.value.status == Status.INVALID_ARGUMENT
    assert info.value.message == "batch_indices: dtype torch.int64 is not allowed; allowed: torch.int32 (convert " \
                                 "with .int())"
    with pytest.raises(AttnjitError, match="k_cache: dtype float16 differs from append_key's dtype bfloat16"):
        append_paged_kv_cache(k, k, idx, idx, cache.half(), torch.zeros(3, **i32), torch.tensor([0, 3], **i32),
                              torch.tensor([4], **i32))
    with pytest.raises(AttnjitError, match=r"paged_kv_cache: expected a torch.Tensor or a tuple"):
        append_paged_kv_cache(k, k, idx, idx, [cache[:, 0], cache[:, 1]], torch.zeros(3, **i32),
                              torch.tensor([0, 3], **i32), torch.tensor([4], **i32))
    with pytest.raises(AttnjitError, match=r"positions: shape \[5\] is not allowed; allowed: \[4\] \(nnz\)"):
        get_batch_indices_positions(torch.tensor([0, 4], **i32), torch.tensor([4], **i32), 4,
                                    positions=torch.zeros(5, **i32))
    with pytest.raises(AttnjitError, match="nnz=-1 is not allowed"):
        get_batch_indices_positions(torch.tensor([0, 4], **i32), torch.tensor([4], **i32), -1)
    with pytest.raises(AttnjitError, match="seq_lens: dtype torch.int64 is not allowed"):
        get_batch_indices_positions(torch.tensor([0, 4], **i32), torch.tensor([4], device=DEVICE), 4)


def test_a_cuda_graph_replays_positions_and_append_on_new_tables():
    """An engine's step, captured once: positions from fixed indptr/seq_lens buffers, then the append."""
    gen = torch.Generator(device=DEVICE).manual_seed(13)
    batch, heads, head_dim, page_size, nnz, max_pages = 3, 2, 64, 5, 12, 32
    i32 = dict(dtype=torch.int32, device=DEVICE)
    append_indptr, seq_lens = torch.zeros(batch + 1, **i32), torch.zeros(batch, **i32)
    kv_indices, kv_indptr, last = torch.zeros(max_pages, **i32), torch.zeros(batch + 1, **i32), torch.zeros(batch, **i32)
    bi, pos = torch.zeros(nnz, **i32), torch.zeros(nnz, **i32)
    k, v = _random([nnz, heads, head_dim], torch.bfloat16, gen), _random([nnz, heads, head_dim], torch.bfloat16, gen)
    cache = _random([max_pages, 2, page_size, heads, head_dim], torch.bfloat16, gen)

    def load(before, appended):
        t = _tables(before, appended, page_size, gen)
        ids = torch.zeros(max_pages, **i32)
        ids[:t["kv_indices"].shape[0]] = t["kv_indices"]
        lengths = [b + a for b, a in zip(before, appended)]
        indptr = [0]
        for a in appended:
            indptr.append(indptr[-1] + a)
        append_indptr.copy_(torch.tensor(indptr, **i32))
        seq_lens.copy_(torch.tensor(lengths, **i32))
        kv_indices.copy_(ids)
        kv_indptr.copy_(t["kv_indptr"])
        last.copy_(t["kv_last_page_len"])
        return t

    def step():
        get_batch_indices_positions(append_indptr, seq_lens, nnz, batch_indices=bi, positions=pos)
        append_paged_kv_cache(k, v, bi, pos, cache, kv_indices, kv_indptr, last)

    load([0, 0, 0], [4, 4, 4])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # loads both kernels before the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for before, appended in (([4, 4, 4], [1, 10, 1]), ([3, 9, 0], [0, 7, 5]), ([20, 1, 2], [12, 0, 0])):
        t = load(before, appended)
        t["kv_indices"] = kv_indices.clone()
        cache.copy_(_random(list(cache.shape), torch.bfloat16, gen))
        want_k, want_v = _reference(k, v, t, cache[:, 0], cache[:, 1], page_size, "NHD")
        graph.replay()
        torch.cuda.synchronize()
        assert bi.tolist() == t["batch_indices"].tolist() and pos.tolist() == t["positions"].tolist()
        assert torch.equal(_bytes(cache[:, 0]), want_k)
        assert torch.equal(_bytes(cache[:, 1]), want_v)

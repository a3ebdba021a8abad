"""Page tables that read transformers' K/V tensors where they lie (no copy).

A [batch, heads, kv_len, head_dim] tensor with strides (sb, sh, sk, 1) -- the DynamicCache's HND tensors,
or a projection's NHD storage seen through .transpose(1, 2) -- is a paged cache of page size P in attnjit's
HND form: page n of request i starts at row i * sb / sk + n * P, so with P dividing sb / sk, kv_len and
every request's first key, the view as_strided([pages, heads, P, head_dim], (P * sk, sh, sk, 1)) holds
each request's keys [start_i, end) in whole pages (the last one partial). Continuous batching's cache
([slots, heads, head_dim], slots in blocks of block_size) is paged by its own blocks where a request's
slots run through whole blocks, else page by page of one slot.
"""

import math

from ...errors import invalid_argument


class PageTable:
    """Host int32 index arrays in FlashInfer's form (indptr [batch + 1], indices, last_page_len [batch]), the
    page size, and the number of pages the view must hold."""

    __slots__ = ("indptr", "indices", "last_page_len", "page_size", "num_pages")

    def __init__(self, indptr, indices, last_page_len, page_size, num_pages):
        self.indptr, self.indices, self.last_page_len = indptr, indices, last_page_len
        self.page_size, self.num_pages = page_size, num_pages


# Up to this many pages a table is built in Python lists (a handful of small torch ops cost more host time
# than the loop); larger ones with torch's vector ops.
_LIST_PAGES = 4096


def _runs(torch, first_page, lengths, page_size):
    """The table of requests whose keys fill pages first_page[i], first_page[i] + 1, ... (lengths[i] keys)."""
    lengths = [int(n) for n in lengths]
    pages = [-(-n // page_size) for n in lengths]
    total = sum(pages)
    last = [n - (p - 1) * page_size for n, p in zip(lengths, pages)]
    indptr = [0]
    for p in pages:
        indptr.append(indptr[-1] + p)
    if total <= _LIST_PAGES:
        indices = [f + j for f, p in zip(first_page, pages) for j in range(p)]
        num_pages = max(indices) + 1 if total else 1
        indices = torch.tensor(indices, dtype=torch.int32)
    else:
        counts = torch.tensor(pages, dtype=torch.int64)
        within = torch.arange(total, dtype=torch.int64) - torch.repeat_interleave(
            torch.tensor(indptr[:-1], dtype=torch.int64), counts, output_size=total)
        indices = torch.repeat_interleave(torch.tensor(list(first_page), dtype=torch.int64), counts,
                                          output_size=total) + within
        num_pages = int(indices.max()) + 1
        indices = indices.to(torch.int32)
    return PageTable(torch.tensor(indptr, dtype=torch.int32), indices, torch.tensor(last, dtype=torch.int32),
                     page_size, num_pages)


def _row_strides(t):
    """(rows per request, row stride) of t [batch, heads, kv_len, head_dim] in rows, or None where rows are
    not evenly spaced; the strides of a size-1 dimension mean nothing and are given the natural value."""
    batch, _, kv_len, _ = t.shape
    sb, _, sk, _ = t.stride()
    if kv_len == 1:
        sk = sb if batch > 1 and sb > 0 else t.shape[-1]
    if sk <= 0 or sb < 0:
        return None
    if batch == 1:
        sb = kv_len * sk
    if sb % sk:
        return None
    return sb // sk, sk


def dense_layout(torch, key, value):
    """(key, value, rows per request, row stride) with both sharing one strided layout: the tensors as given
    where they do, else contiguous copies (only odd strides need one; transformers' never do)."""
    for name, t in (("key", key), ("value", value)):
        if t.stride(-1) != 1:
            raise invalid_argument(f"{name}: stride {list(t.stride())} is not allowed; allowed: head_dim "
                                   "contiguous (stride 1)")
    strides = _row_strides(key)
    if strides is None or _row_strides(value) != strides or key.stride(1) != value.stride(1):
        key, value = key.contiguous(), value.contiguous()
        strides = _row_strides(key)
    return key, value, strides[0], strides[1]


def dense_table(torch, kv_len, rows_per_request, starts, end):
    """PageTable reading request i's keys [starts[i], end) of a dense [batch, heads, kv_len, head_dim]."""
    page = math.gcd(kv_len, rows_per_request, *starts)
    first = [(i * rows_per_request + s) // page for i, s in enumerate(starts)]
    return _runs(torch, first, [end - s for s in starts], page)


def dense_view(torch, t, pages, row_stride):
    """t [batch, heads, kv_len, head_dim] as attnjit's HND pages [num_pages, heads, page_size, head_dim];
    pages: (page_size, num_pages) of its PageTable."""
    p, num_pages = pages
    return torch.as_strided(t, (num_pages, t.shape[1], p, t.shape[3]), (p * row_stride, t.stride(1), row_stride, 1),
                            t.storage_offset())


def slot_table(torch, slots, kv_indptr, block_size):
    """PageTable for continuous batching's cache from each request's slots (host int64, requests one after
    another as kv_indptr says): pages of block_size where every request's slots run through whole blocks
    from a block's first slot, else pages of one slot."""
    total = int(kv_indptr[-1])
    if slots.numel() != total:
        raise invalid_argument(f"read_index: {slots.numel()} slots is not allowed; allowed: cu_seq_lens_k[-1] = "
                               f"{total}, one per key of the batch")
    lengths = (kv_indptr[1:] - kv_indptr[:-1]).to(torch.int64)
    if total and block_size > 1:
        within = torch.arange(total, dtype=torch.int64) - torch.repeat_interleave(kv_indptr[:-1].to(torch.int64),
                                                                                  lengths)
        page_head = torch.arange(total, dtype=torch.int64) - within % block_size
        heads = slots[page_head]
        if bool((heads % block_size == 0).all()) and torch.equal(slots, heads + within % block_size):
            # Pages numbered per request by _runs; the blocks themselves come from each page's first slot.
            table = _runs(torch, [0] * lengths.numel(), lengths.tolist(), block_size)
            page_of = slots[page_head[within % block_size == 0]] // block_size
            table.indices = page_of.to(torch.int32)
            table.num_pages = int(page_of.max()) + 1 if page_of.numel() else 1
            return table
    table = _runs(torch, [0] * lengths.numel(), lengths.tolist(), 1)
    table.indices = slots.to(torch.int32)
    table.num_pages = int(slots.max()) + 1 if total else 1
    return table


def rows_view(torch, t, page_size):
    """A [rows, heads, head_dim] cache (rows in pages of page_size) as HND pages [pages, heads, page, dim]."""
    rows, heads, dim = t.shape
    s_row, s_head, s_dim = t.stride()
    pages = rows // page_size  # rows past the last whole page (a trash slot) are never a page's
    return torch.as_strided(t, (pages, heads, page_size, dim), (page_size * s_row, s_head, s_row, s_dim),
                            t.storage_offset())

"""The engine harness's tokens and paged KV cache (test_engine_harness.py). Imported after the GPU tests have
skipped without torch or a CUDA device.

Tokens: each request's q, k, v rows for each step, drawn from a seed, and each request's dense K and V (the
reference reads these, never the cache). Cache: one shared paged cache in an engine's form (vLLM's 5-D
[pages, 2, ...] in NHD or HND, SGLang's (k_buffer, v_buffer) of [slots, heads, head_dim], page size 1) that
each step's new K/V is written into with append_paged_kv_cache, its rows placed by
get_batch_indices_positions, as FlashInfer's own tests append.
"""

import torch

I32 = torch.int32


class Tokens:
    """q, k, v rows per (step, request) and each request's dense K/V so far, on `device` in `dtype`.

    q_gain scales the queries (a larger spread of logits, so a soft cap bites). The shared prefix's K/V is
    drawn once and starts every request that shares it."""

    def __init__(self, heads, kv_heads, head_dim, dtype, device, seed, shared_prefix_len, q_gain=1.0):
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.dtype, self.device, self.seed, self.q_gain = dtype, torch.device(device), seed, q_gain
        self.shared_k, self.shared_v = self._draw(shared_prefix_len, kv_heads, 2, seed)
        self.k, self.v = {}, {}  # rid -> [tokens, kv_heads, head_dim]

    def _draw(self, rows, heads, count, seed):
        g = torch.Generator(device=self.device).manual_seed(seed)
        return [torch.randn(rows, heads, self.head_dim, generator=g, device=self.device).to(self.dtype)
                for _ in range(count)]

    def new_rows(self, step, s):
        """(q, k, v) for request s (a Scheduled) in `step`: q [q_len, heads, D], k, v [q_len, kv_heads, D]."""
        seed = self.seed * 1_000_003 + step.index * 1009 + s.rid
        (q,) = self._draw(s.q_len, self.heads, 1, seed)
        k, v = self._draw(s.q_len, self.kv_heads, 2, seed + 7)
        if self.q_gain != 1.0:
            q = (q.float() * self.q_gain).to(self.dtype)
        return q, k, v

    def extend(self, s, k, v):
        """Appends request s's new rows to its dense K/V (after the shared prefix where it starts with it)."""
        if s.rid not in self.k:
            start = s.cached  # the shared prefix length, or 0
            self.k[s.rid], self.v[s.rid] = self.shared_k[:start], self.shared_v[:start]
        assert self.k[s.rid].shape[0] == s.cached, f"r{s.rid}: dense K has {self.k[s.rid].shape[0]} rows, " \
                                                   f"the trace says {s.cached} are cached"
        self.k[s.rid] = torch.cat([self.k[s.rid], k])
        self.v[s.rid] = torch.cat([self.v[s.rid], v])

    def dense(self, rid):
        return self.k[rid], self.v[rid]

    def forget(self, rid):
        self.k.pop(rid, None)
        self.v.pop(rid, None)


class PagedCache:
    """The engine's paged KV cache, filled with stale values at first (what freed pages hold).

    form "5d": one tensor [pages, 2, page_size, kv_heads, D] (NHD) or [pages, 2, kv_heads, page_size, D] (HND),
    vLLM's; form "3d": a (k_buffer, v_buffer) tuple of [pages, kv_heads, D] with page_size 1, SGLang's
    token pool."""

    def __init__(self, form, num_pages, page_size, kv_heads, head_dim, dtype, device, layout, seed):
        if form not in ("5d", "3d"):
            raise ValueError(f"form={form!r}: allowed '5d', '3d'")
        if form == "3d" and (page_size != 1 or layout != "NHD"):
            raise ValueError("a 3-D (k_buffer, v_buffer) pool has page_size 1 and the NHD layout")
        self.form, self.page_size, self.layout, self.device = form, page_size, layout, torch.device(device)
        g = torch.Generator(device=self.device).manual_seed(seed)
        if form == "5d":
            shape = ((num_pages, 2, page_size, kv_heads, head_dim) if layout == "NHD"
                     else (num_pages, 2, kv_heads, page_size, head_dim))
            self.cache = (torch.randn(shape, generator=g, device=self.device) * 4).to(dtype)
        else:
            shape = (num_pages, kv_heads, head_dim)
            self.cache = tuple((torch.randn(shape, generator=g, device=self.device) * 4).to(dtype) for _ in range(2))

    def _tables(self, batch):
        """FlashInfer's page table of the batch's requests after this step's rows, and the append's indptr and
        lengths: int32 on the device."""
        indptr, indices, last, append, lens = [0], [], [], [0], []
        for s in batch:
            pages = s.pages[:-(-s.kv_len // self.page_size)]
            indices.extend(pages)
            indptr.append(len(indices))
            last.append(s.kv_len - (len(pages) - 1) * self.page_size)
            append.append(append[-1] + s.q_len)
            lens.append(s.kv_len)
        return {name: torch.tensor(values, dtype=I32, device=self.device) for name, values in
                (("kv_indptr", indptr), ("kv_indices", indices), ("kv_last_page_len", last),
                 ("append_indptr", append), ("seq_lens", lens))}

    def write(self, fi, batch, k, v, check_against_index_write=False):
        """Writes the batch's new rows (k, v [sum q_len, kv_heads, D], in batch order; views are fine) with
        fi.get_seq_lens, fi.get_batch_indices_positions and fi.append_paged_kv_cache. With
        check_against_index_write, the whole cache afterwards must equal a torch index write of the same
        rows into a copy taken before, and the positions must be the rows' own."""
        t = self._tables(batch)
        before = self._copy() if check_against_index_write else None
        seq_lens = fi.get_seq_lens(t["kv_indptr"], t["kv_last_page_len"], self.page_size)
        assert torch.equal(seq_lens.to(I32), t["seq_lens"]), "get_seq_lens disagrees with the page table's lengths"
        nnz = k.shape[0]
        batch_indices, positions = fi.get_batch_indices_positions(t["append_indptr"], seq_lens.to(I32), nnz)
        fi.append_paged_kv_cache(k, v, batch_indices, positions, self.cache, t["kv_indices"], t["kv_indptr"],
                                 t["kv_last_page_len"], self.layout)
        if before is not None:
            rows = [(b, s.cached + r) for b, s in enumerate(batch) for r in range(s.q_len)]
            want_b = torch.tensor([b for b, _ in rows], dtype=I32, device=self.device)
            want_p = torch.tensor([p for _, p in rows], dtype=I32, device=self.device)
            assert torch.equal(batch_indices, want_b) and torch.equal(positions, want_p), \
                "get_batch_indices_positions: rows placed elsewhere than each request's next positions"
            self._index_write(before, batch, k, v)
            after = self._copy()
            for name, got, want in zip(("k", "v"), after, before):
                assert torch.equal(got, want), f"append_paged_kv_cache: the {name} cache differs from a torch " \
                                               "index write of the same rows"

    def _copy(self):
        """(K, V) copies as [pages, page_size, kv_heads, D] (NHD order whatever the layout)."""
        if self.form == "3d":
            return [c.clone()[:, None] for c in self.cache]
        kv = self.cache if self.layout == "NHD" else self.cache.transpose(2, 3)
        return [kv[:, 0].clone(), kv[:, 1].clone()]

    def _index_write(self, copies, batch, k, v):
        row = 0
        for s in batch:
            positions = torch.arange(s.cached, s.kv_len)
            pages = torch.tensor(s.pages, dtype=torch.long)[positions // self.page_size]
            slots = positions % self.page_size
            copies[0][pages.to(self.device), slots.to(self.device)] = k[row:row + s.q_len]
            copies[1][pages.to(self.device), slots.to(self.device)] = v[row:row + s.q_len]
            row += s.q_len

"""A paged KV cache the GPU tests hand out pages of, FlashInfer's page tables for a list of requests, and each
request's dense K and V for the float64 reference. Imported only after the tests have skipped without torch or
a CUDA device."""

import torch

DEVICE = "cuda"


class PagePool:
    """kv [pages, 2, page_size, num_kv_heads, head_dim] (NHD; HND swaps the middle two) of random values, its
    pages handed out in a shuffled order so no request's pages are adjacent by accident."""

    def __init__(self, num_pages, page_size, num_kv_heads, head_dim, dtype, seed, layout="NHD"):
        g = torch.Generator(device=DEVICE).manual_seed(seed)
        self.page_size, self.layout = page_size, layout
        shape = ((num_pages, 2, page_size, num_kv_heads, head_dim) if layout == "NHD"
                 else (num_pages, 2, num_kv_heads, page_size, head_dim))
        self.kv = torch.randn(shape, generator=g, device=DEVICE).to(dtype)
        self.free = torch.randperm(num_pages, generator=g, device=DEVICE).cpu().tolist()

    def take(self, count):
        assert count <= len(self.free), "the pool is too small for the test's requests"
        pages, self.free = self.free[:count], self.free[count:]
        return pages

    def dense(self, pages, length):
        """K and V [length, num_kv_heads, head_dim] of the first `length` rows of `pages`, in the cache's dtype."""
        kv = self.kv[torch.tensor(pages, dtype=torch.long, device=DEVICE)]
        if self.layout == "HND":
            kv = kv.transpose(2, 3)
        k = kv[:, 0].reshape(-1, *kv.shape[3:])[:length]
        v = kv[:, 1].reshape(-1, *kv.shape[3:])[:length]
        return k, v


class Requests:
    """Requests of the given KV lengths (each >= 1) over pages taken from `pool`: FlashInfer's page table
    (indptr, indices, last_page_len: int32 on the host) and each request's dense K, V."""

    def __init__(self, pool, kv_lens):
        self.pool, self.kv_lens = pool, list(kv_lens)
        ps = pool.page_size
        self.pages = [pool.take(-(-n // ps)) for n in kv_lens]
        counts = [len(p) for p in self.pages]
        self.indptr = torch.tensor([0] + [sum(counts[: i + 1]) for i in range(len(counts))], dtype=torch.int32)
        self.indices = torch.tensor([p for pages in self.pages for p in pages], dtype=torch.int32)
        self.last_page_len = torch.tensor([n - (len(p) - 1) * ps for n, p in zip(kv_lens, self.pages)],
                                          dtype=torch.int32)

    def dense(self, r):
        return self.pool.dense(self.pages[r], self.kv_lens[r])

    def table(self):
        return self.indptr, self.indices, self.last_page_len


def indptr(lengths):
    """[0, l0, l0 + l1, ...] as an int32 host tensor."""
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32)

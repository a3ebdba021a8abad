"""What the batch decode GPU tests share (test_batch_decode.py,
test_batch_decode_trtllm_v3.py): a paged cache with its page tables, a
float64 torch reference, and the output checks. Imported only after those
modules have skipped without torch or a CUDA device.
"""

import math

import torch

import attnjit

DEVICE = "cuda"
O_TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
LSE_TOL = {torch.float16: 4e-3, torch.bfloat16: 2e-2}


class PagedBatch:
    """A paged cache [pages, 2, ...] in `layout` with each request's pages
    scattered (a shuffled pool plus unused pages), the FlashInfer page table,
    the block table, and each request's dense K and V for the reference."""

    def __init__(self, lens, page_size, num_kv_heads, head_dim, dtype, layout, seed):
        g = torch.Generator(device=DEVICE).manual_seed(seed)
        self.lens, self.page_size, self.layout = lens, page_size, layout
        pages_per = [(n + page_size - 1) // page_size for n in lens]
        num_pages = sum(pages_per) + 3
        perm = torch.randperm(num_pages, generator=g, device=DEVICE).cpu()
        self.indptr = torch.tensor([0] + list(_cumsum(pages_per)), dtype=torch.int32)
        self.indices = perm[: sum(pages_per)].to(torch.int32)
        self.last_page_len = torch.tensor([n - (p - 1) * page_size for n, p in zip(lens, pages_per)],
                                          dtype=torch.int32)
        self.max_pages = max(pages_per)
        table = torch.zeros(len(lens), self.max_pages, dtype=torch.int32)
        for r, p in enumerate(pages_per):
            table[r, :p] = self.indices[self.indptr[r]:self.indptr[r] + p]
        self.block_tables = table.to(DEVICE)
        self.seq_lens = torch.tensor(lens, dtype=torch.int32, device=DEVICE)
        shape = ((num_pages, 2, page_size, num_kv_heads, head_dim) if layout == "NHD"
                 else (num_pages, 2, num_kv_heads, page_size, head_dim))
        self.kv = torch.randn(shape, generator=g, device=DEVICE).to(dtype)

    def dense(self, r):
        """Request r's K and V [len, kv_heads, head_dim] in float64 (fp8 widens exactly)."""
        pages = self.indices[self.indptr[r]:self.indptr[r + 1]].long().to(DEVICE)
        kv = self.kv[pages].double()  # [p, 2, ...]
        if self.layout == "HND":
            kv = kv.transpose(2, 3)  # to [p, 2, page_size, heads, D]
        k = kv[:, 0].reshape(-1, *kv.shape[3:])[: self.lens[r]]
        v = kv[:, 1].reshape(-1, *kv.shape[3:])[: self.lens[r]]
        return k, v


def _cumsum(xs):
    total = 0
    for x in xs:
        total += x
        yield total


def reference(q, batch, sm_scale=None, sinks=None, q_lens=None, v_scale=1.0):
    """o [T, H, D] and lse [T, H] (base 2) in float64 for the T query rows of q.

    q_lens: query tokens per request (speculative decoding), request r's at consecutive rows; default one
    per request. Token t of a request with q_len tokens and KV length L sits at position L - q_len + t and
    sees keys [0, L - q_len + t]. sinks [H]: TensorRT-LLM's attention sinks, one more logit per head in
    the softmax with no value (its weight goes nowhere), counted in lse. v_scale multiplies o."""
    q_lens = q_lens if q_lens is not None else [1] * q.shape[0]
    assert sum(q_lens) == q.shape[0] and len(q_lens) == len(batch.lens)
    outs, lses = [], []
    row = 0
    for r, q_len in enumerate(q_lens):
        k, v = batch.dense(r)
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[2])
        for t in range(q_len):
            visible = batch.lens[r] - q_len + t + 1  # keys up to the token's own position
            s = torch.einsum("hd,lhd->hl", q[row].double(), k[:visible]) * scale
            if sinks is not None:
                s = torch.cat([s, sinks.double().to(DEVICE)[:, None]], dim=1)  # the sink is the last column
            p = torch.softmax(s, dim=-1)
            if sinks is not None:
                p = p[:, :-1]
            outs.append(torch.einsum("hl,lhd->hd", p, v[:visible]) * v_scale)
            lses.append(torch.logsumexp(s, dim=-1) / math.log(2.0))
            row += 1
    return torch.stack(outs), torch.stack(lses)


def poison(shape, dtype):
    """Leaves NaN in the allocator's free memory, so an output left unwritten shows."""
    torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)
    torch.full(shape[:2], float("nan"), dtype=torch.float32, device=DEVICE)


def check(o, lse, o_ref, lse_ref, dtype):
    torch.cuda.synchronize()
    assert torch.isfinite(o).all(), "o has non-finite values (poisoned memory left unwritten?)"
    err = ((o.double() - o_ref).norm() / o_ref.norm()).item()
    assert err <= O_TOL[dtype], f"relative error of o {err:.2e} > {O_TOL[dtype]:.0e}"
    if lse is not None:
        assert lse.dtype == torch.float32 and lse.shape == o.shape[:2]
        assert torch.isfinite(lse).all()
        lse_err = (lse.double() - lse_ref).abs().max().item()
        assert lse_err <= LSE_TOL[dtype], f"lse error {lse_err:.2e} > {LSE_TOL[dtype]:.0e}"


def make_q(rows, num_qo_heads, head_dim, dtype, seed):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(rows, num_qo_heads, head_dim, generator=g, device=DEVICE).to(dtype)


def workspace():
    return torch.empty(128 << 20, dtype=torch.uint8, device=DEVICE)


def graph_wrapper(layout, max_batch, max_pages=256):
    """A CUDA-graph-mode BatchDecodeWithPagedKVCacheWrapper over fixed page-table buffers (indptr, indices,
    last_page_len) for `max_batch` requests and `max_pages` pages; returns it and the buffers. FlashInfer's
    graph mode plans exactly the buffers' batch size."""
    bufs = (torch.empty(max_batch + 1, dtype=torch.int32, device=DEVICE),
            torch.empty(max_pages, dtype=torch.int32, device=DEVICE),
            torch.empty(max_batch, dtype=torch.int32, device=DEVICE))
    w = attnjit.BatchDecodeWithPagedKVCacheWrapper(workspace(), kv_layout=layout, use_cuda_graph=True,
                                                   paged_kv_indptr_buffer=bufs[0], paged_kv_indices_buffer=bufs[1],
                                                   paged_kv_last_page_len_buffer=bufs[2])
    return w, bufs


def sink_logits(num_qo_heads):
    """-2 to 4 per head (as the C++ test): from negligible to dominating a short request's denominator."""
    return torch.tensor([-2.0 + 1.5 * (h % 5) for h in range(num_qo_heads)], dtype=torch.float32, device=DEVICE)

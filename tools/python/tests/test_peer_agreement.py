"""attnjit against FlashInfer itself, same inputs, same process: the outputs
agree and so does the lse convention (base 2, the positional encoding's
terms included), for the encodings and entry points whose conventions could
differ. Under ALiBi the lse differs by a known per-row constant
(_alibi_lse_shift; docs/ARCHITECTURE.md says why attnjit keeps its own).
Skips where FlashInfer is not installed (it is on the GPU machine's
benchmark path: tools/gpu/*.sh) or no GPU is visible.
"""

import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)
flashinfer = pytest.importorskip("flashinfer", reason="FlashInfer is not installed: nothing to agree with")

import attnjit  # noqa: E402
from alibi import alibi_slopes  # noqa: E402


def _alibi_lse_shift(num_heads, offsets):
    """What FlashInfer's lse adds to attnjit's under ALiBi, [len(offsets), heads] (base 2).

    attnjit biases key j of a query at absolute position q_pos (kv_len - qo_len + i) by
    slope * (j - q_pos), ALiBi's relative distance, so its lse is the log-sum-exp of the
    logits the model defines and merges across any split of the KV. FlashInfer measures
    from the query's index among the new tokens (i; decode: 0), which shifts every logit
    of the row, and so its lse, by slope * (kv_len - qo_len + i - i_fi): the output is the
    same (softmax does not see a per-row constant); the lse differs by exactly this."""
    offsets = torch.tensor(offsets, dtype=torch.float64, device="cuda")
    return offsets[:, None] * alibi_slopes(num_heads)[None, :] * (1.0 / math.log(2.0))


def _agree(ours, theirs, lse_ours=None, lse_theirs=None, o_tol=5e-3, lse_tol=1e-2):
    rel = ((ours.double() - theirs.double()).norm() / theirs.double().norm()).item()
    assert rel <= o_tol, f"rel L2 difference of o: {rel}"
    if lse_ours is not None:
        worst = (lse_ours.double() - lse_theirs.double()).abs().max().item()
        assert worst <= lse_tol, f"abs difference of lse: {worst} (FlashInfer / attnjit at 0: " \
                                 f"{lse_theirs.flatten()[0].item()} / {lse_ours.flatten()[0].item()})"


@pytest.mark.parametrize("pos", ["NONE", "ALIBI", "ROPE_LLAMA"])
def test_single_prefill_with_lse(pos):
    torch.manual_seed(0)
    q = torch.randn(77, 8, 128, dtype=torch.float16, device="cuda")
    k = torch.randn(300, 2, 128, dtype=torch.float16, device="cuda")
    v = torch.randn(300, 2, 128, dtype=torch.float16, device="cuda")
    args = dict(causal=True, pos_encoding_mode=pos, return_lse=True)
    o, lse = attnjit.single_prefill_with_kv_cache(q, k, v, **args)
    fo, flse = flashinfer.single_prefill_with_kv_cache(q, k, v, backend="fa2", **args)
    if pos == "ALIBI":  # every query: FlashInfer's distance is kv_len - qo_len longer
        lse = lse.double() + _alibi_lse_shift(8, [300 - 77] * 77)
    _agree(o, fo, lse, flse)


def test_paged_prefill_with_lse_and_soft_cap():
    torch.manual_seed(1)
    page, hq, hk, d = 16, 12, 4, 128
    qo_indptr = torch.tensor([0, 5, 105, 106], dtype=torch.int32)
    kv_lens = [40, 300, 17]
    pages = [-(-n // page) for n in kv_lens]
    kv_indptr = torch.tensor([0] + list(torch.tensor(pages).cumsum(0)), dtype=torch.int32)
    ids = torch.randperm(sum(pages)).int()
    last = torch.tensor([n - (p - 1) * page for n, p in zip(kv_lens, pages)], dtype=torch.int32)
    q = torch.randn(106, hq, d, dtype=torch.bfloat16, device="cuda")
    cache = torch.randn(sum(pages), 2, page, hk, d, dtype=torch.bfloat16, device="cuda")
    outs = []
    for lib in (attnjit, flashinfer):
        w = lib.BatchPrefillWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), "NHD")
        arrays = (qo_indptr, kv_indptr, ids, last) if lib is attnjit else \
            tuple(x.cuda() for x in (qo_indptr, kv_indptr, ids, last))
        w.plan(*arrays, hq, hk, d, page, causal=True, logits_soft_cap=30.0, q_data_type=torch.bfloat16)
        outs.append(w.run(q, cache, return_lse=True))
    _agree(outs[0][0], outs[1][0], outs[0][1], outs[1][1], o_tol=1e-2)


@pytest.mark.parametrize("pos", ["NONE", "ALIBI"])
def test_batch_decode_with_lse(pos):
    torch.manual_seed(2)
    page, hq, hk, d, batch = 16, 32, 8, 128, 5
    kv_lens = [1, 17, 500, 2048, 33]
    pages = [-(-n // page) for n in kv_lens]
    indptr = torch.tensor([0] + list(torch.tensor(pages).cumsum(0)), dtype=torch.int32, device="cuda")
    ids = torch.randperm(sum(pages)).int().cuda()
    last = torch.tensor([n - (p - 1) * page for n, p in zip(kv_lens, pages)], dtype=torch.int32, device="cuda")
    q = torch.randn(batch, hq, d, dtype=torch.float16, device="cuda")
    cache = torch.randn(sum(pages), 2, page, hk, d, dtype=torch.float16, device="cuda")
    outs = []
    for lib in (attnjit, flashinfer):
        w = lib.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), "NHD")
        w.plan(indptr, ids, last, hq, hk, d, page, pos_encoding_mode=pos, q_data_type=torch.float16)
        outs.append(w.run(q, cache, return_lse=True))
    assert math.isfinite(outs[0][1].sum().item())
    lse = outs[0][1]
    if pos == "ALIBI":  # the query sits at kv_len - 1; FlashInfer's decode measures from 0
        lse = lse.double() + _alibi_lse_shift(hq, [n - 1 for n in kv_lens])
    _agree(outs[0][0], outs[1][0], lse, outs[1][1])

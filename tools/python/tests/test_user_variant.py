"""attnjit.Variant (issue 31) on a GPU: user score_mod / mask_mod snippets through the single functions and the
wrappers (the checks that need no GPU: test_user_variant_binding.py).

Skips without torch and a CUDA device. The examples of issue 31, each against a float64 reference on random
inputs (odd lengths, grouped heads) and, where attnjit has the same thing built in, against the built-in (same
output within rounding): soft cap and ALiBi as score_mod; causal and a sliding window with sink tokens as mask_mod; document masking over packed
sequences (doc ids in a tensor); prefix-LM; a T5-style relative-position bias table; and params rebound between
runs of one plan. The speculative-decoding tree mask on batch decode is a Catch2 GPU test
(tests/user_variant/gpu_test.cpp): the Python decode wrapper plans one query token per request.
"""

import pytest

import attnjit
from attnjit import AttnjitError, Status

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

from alibi import alibi_slopes  # noqa: E402
from masked_reference import reference, rel  # noqa: E402

TOLERANCE = {torch.float16: 3e-3, torch.bfloat16: 1.5e-2}  # relative Frobenius error against float64
TWIN = {torch.float16: 2e-3, torch.bfloat16: 1e-2}  # snippet against its built-in twin (rounding only)


def qkv(qo, kv, heads=8, kv_heads=2, d=128, dtype=torch.float16, seed=0, scale=1.0):
    torch.manual_seed(seed)
    q = torch.randn(qo, heads, d, dtype=dtype, device="cuda") * scale
    k = torch.randn(kv, kv_heads, d, dtype=dtype, device="cuda") * scale
    v = torch.randn(kv, kv_heads, d, dtype=dtype, device="cuda")
    return q, k, v


DTYPES = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ["auto", "fa2"])
def test_soft_cap_as_score_mod_matches_the_builtin_cap(dtype, backend):
    q, k, v = qkv(77, 301, dtype=dtype, seed=1, scale=2.0)  # logits of several units: the cap bites
    cap = 3.0
    variant = attnjit.Variant(score_mod="return p.cap * tanhf(s / p.cap);", params={"cap": cap})
    o, lse = attnjit.single_prefill_with_kv_cache_return_lse(q, k, v, backend=backend, variant=variant)
    twin, twin_lse = attnjit.single_prefill_with_kv_cache_return_lse(q, k, v, backend=backend, logits_soft_cap=cap)
    o_ref, lse_ref = reference(q, k, v, score=lambda s, h, i, j: cap * torch.tanh(s / cap))
    assert rel(o, o_ref) < TOLERANCE[dtype]
    assert (lse.double() - lse_ref).abs().max().item() < 1e-2
    assert rel(o, twin) < TWIN[dtype]
    assert (lse - twin_lse).abs().max().item() < 1e-3


ALIBI = "return s + p.slope_at(h) * float(kv - (q + p.offset));"


@pytest.mark.parametrize("dtype", DTYPES)
def test_alibi_as_score_mod_matches_the_builtin_alibi_prefill(dtype):
    qo, kv = 100, 333
    q, k, v = qkv(qo, kv, heads=12, kv_heads=4, dtype=dtype, seed=2)
    slopes = alibi_slopes(12).float()
    variant = attnjit.Variant(score_mod=ALIBI, params={"slope": slopes, "offset": kv - qo})
    o = attnjit.single_prefill_with_kv_cache(q, k, v, causal=False, variant=variant)
    twin = attnjit.single_prefill_with_kv_cache(q, k, v, causal=False, pos_encoding_mode="ALIBI")
    sl = slopes.double()[:, None, None]
    o_ref, _ = reference(q, k, v, score=lambda s, h, i, j: s + sl * (j - (i + kv - qo)).double())
    assert rel(o, o_ref) < TOLERANCE[dtype]
    assert rel(o, twin) < TWIN[dtype]


@pytest.mark.parametrize("use_tensor_cores", [False, True])
def test_alibi_as_score_mod_matches_the_builtin_alibi_decode(use_tensor_cores):
    kv = 1777
    torch.manual_seed(3)
    q = torch.randn(8, 128, dtype=torch.float16, device="cuda")
    k = torch.randn(kv, 2, 128, dtype=torch.float16, device="cuda")
    v = torch.randn(kv, 2, 128, dtype=torch.float16, device="cuda")
    slopes = alibi_slopes(8).float()
    # decode's one query is q = 0 at position kv - 1
    variant = attnjit.Variant(score_mod=ALIBI, params={"slope": slopes, "offset": kv - 1})
    o = attnjit.single_decode_with_kv_cache(q, k, v, use_tensor_cores=use_tensor_cores, variant=variant)
    twin = attnjit.single_decode_with_kv_cache(q, k, v, use_tensor_cores=use_tensor_cores, pos_encoding_mode="ALIBI")
    sl = slopes.double()[:, None, None]
    o_ref, _ = reference(q[None], k, v, score=lambda s, h, i, j: s + sl * (j - (kv - 1)).double())
    assert rel(o, o_ref[0]) < TOLERANCE[torch.float16]
    assert rel(o, twin) < TWIN[torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("qo,kv", [(200, 200), (63, 517)])
@pytest.mark.parametrize("backend", ["auto", "fa2", "fa3", "fa3_ws"])
def test_causal_as_mask_mod_matches_causal_true(dtype, qo, kv, backend):
    if backend.startswith("fa3") and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"backend='{backend}' needs sm_90")
    q, k, v = qkv(qo, kv, dtype=dtype, seed=4)
    variant = attnjit.Variant(mask_mod="return kv <= q + p.offset;", params={"offset": kv - qo})
    o, lse = attnjit.single_prefill_with_kv_cache_return_lse(q, k, v, backend=backend, variant=variant)
    twin, twin_lse = attnjit.single_prefill_with_kv_cache_return_lse(q, k, v, backend=backend, causal=True)
    o_ref, _ = reference(q, k, v, visible=lambda h, i, j: j <= i + (kv - qo))
    assert rel(o, o_ref) < TOLERANCE[dtype]
    assert rel(o, twin) < TWIN[dtype]
    assert (lse - twin_lse).abs().max().item() < 1e-3


WINDOW_WITH_SINKS = "int pos = q + p.offset; return kv <= pos && (kv < p.sinks || pos - kv <= p.window);"


@pytest.mark.parametrize("dtype", DTYPES)
def test_sliding_window_with_sink_tokens_as_mask_mod(dtype):
    qo, kv, window, sinks = 301, 1000, 127, 4
    q, k, v = qkv(qo, kv, dtype=dtype, seed=5)
    variant = attnjit.Variant(mask_mod=WINDOW_WITH_SINKS,
                              params={"offset": kv - qo, "window": window, "sinks": sinks})
    o = attnjit.single_prefill_with_kv_cache(q, k, v, variant=variant)

    def visible(h, i, j):
        pos = i + (kv - qo)
        return (j <= pos) & ((j < sinks) | (pos - j <= window))

    o_ref, _ = reference(q, k, v, visible=visible)
    assert rel(o, o_ref) < TOLERANCE[dtype]
    # Without sink tokens it is the built-in causal window.
    variant.bind(sinks=0)
    o = attnjit.single_prefill_with_kv_cache(q, k, v, variant=variant)
    twin = attnjit.single_prefill_with_kv_cache(q, k, v, causal=True, window_left=window)
    assert rel(o, twin) < TWIN[dtype]


DOCUMENTS = "return p.doc_at(q) == p.doc_at(kv) && kv <= q;"


@pytest.mark.parametrize("dtype", DTYPES)
def test_document_masking_over_packed_sequences(dtype):
    lengths = [100, 37, 263, 1, 99]
    n = sum(lengths)
    doc = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32),
                                  torch.tensor(lengths)).to("cuda")
    q, k, v = qkv(n, n, heads=8, kv_heads=2, dtype=dtype, seed=6)
    variant = attnjit.Variant(mask_mod=DOCUMENTS, params={"doc": doc})
    o = attnjit.single_prefill_with_kv_cache(q, k, v, variant=variant)
    d64 = doc.long()
    o_ref, _ = reference(q, k, v, visible=lambda h, i, j: (d64[i] == d64[j]) & (j <= i))
    assert rel(o, o_ref) < TOLERANCE[dtype]
    # Its built-in twin: the same documents as a ragged causal batch.
    indptr = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)
    ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    w = attnjit.BatchPrefillWithRaggedKVCacheWrapper(ws)
    w.plan(indptr, indptr, 8, 2, 128, causal=True, q_data_type=dtype)
    assert rel(o, w.run(q, k, v)) < TWIN[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_prefix_lm(dtype):
    n, prefix = 333, 90
    q, k, v = qkv(n, n, dtype=dtype, seed=7)
    variant = attnjit.Variant(mask_mod="return kv < p.prefix || kv <= q;", params={"prefix": prefix})
    o = attnjit.single_prefill_with_kv_cache(q, k, v, variant=variant)
    o_ref, _ = reference(q, k, v, visible=lambda h, i, j: (j < prefix) | (j <= i))
    assert rel(o, o_ref) < TOLERANCE[dtype]


T5_BIAS = """int r = kv - (q + p.offset);
r = r < -p.reach ? -p.reach : (r > p.reach ? p.reach : r);
return s + p.bias_at(h, r + p.reach);"""


def t5_reference_score(bias, reach, offset):
    def score(s, h, i, j):
        r = (j - (i + offset)).clamp(-reach, reach) + reach
        return s + bias.double()[h, r]

    return score


@pytest.mark.parametrize("dtype", DTYPES)
def test_t5_relative_position_bias_table(dtype):
    qo, kv, heads, reach = 129, 400, 8, 32
    q, k, v = qkv(qo, kv, heads=heads, dtype=dtype, seed=8)
    torch.manual_seed(9)
    bias = torch.randn(heads, 2 * reach + 1, device="cuda")  # float32 [H, buckets]
    variant = attnjit.Variant(score_mod=T5_BIAS, params={"bias": bias, "reach": reach, "offset": kv - qo})
    o = attnjit.single_prefill_with_kv_cache(q, k, v, causal=True, variant=variant)  # a score_mod keeps causal
    o_ref, _ = reference(q, k, v, score=t5_reference_score(bias, reach, kv - qo),
                         visible=lambda h, i, j: j <= i + (kv - qo))
    assert rel(o, o_ref) < TOLERANCE[dtype]


def test_paged_wrapper_reads_rebound_params_at_each_run_without_a_new_plan():
    """A serving engine's pattern: plan once, change the params between runs (here the bias table and a
    per-request shift), each run reads the values bound then."""
    torch.manual_seed(10)
    page, heads, kv_heads, d, reach = 16, 8, 2, 128, 8
    qo_lens, kv_lens = [5, 1, 40], [37, 100, 40]
    pages = [(n + page - 1) // page for n in kv_lens]
    kv_indptr = torch.tensor([0] + list(torch.tensor(pages).cumsum(0)), dtype=torch.int32)
    qo_indptr = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
    total_pages = int(kv_indptr[-1])
    indices = torch.randperm(total_pages, dtype=torch.int32)
    last = torch.tensor([(n - 1) % page + 1 for n in kv_lens], dtype=torch.int32)
    cache = torch.randn(total_pages, 2, page, kv_heads, d, dtype=torch.float16, device="cuda")
    q = torch.randn(sum(qo_lens), heads, d, dtype=torch.float16, device="cuda")
    shift = torch.zeros(len(qo_lens), dtype=torch.float32, device="cuda")
    bias = torch.randn(heads, 2 * reach + 1, device="cuda")
    variant = attnjit.Variant(score_mod="int r = kv - q; r = r < -p.reach ? -p.reach : (r > p.reach ? p.reach : r);\n"
                                        "return s + p.bias_at(h, r + p.reach) + p.shift_at(b);",
                              params={"bias": bias, "shift": shift, "reach": reach})
    ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    w = attnjit.BatchPrefillWithPagedKVCacheWrapper(ws)
    w.plan(qo_indptr, kv_indptr.cuda(), indices.cuda(), last.cuda(), heads, kv_heads, d, page, causal=True,
           variant=variant)

    def expected(bias_now, shift_now):
        outs = []
        for b, (qo, kv) in enumerate(zip(qo_lens, kv_lens)):
            ids = indices[int(kv_indptr[b]):int(kv_indptr[b + 1])].long().cuda()
            k = cache[ids, 0].reshape(-1, kv_heads, d)[:kv]
            v = cache[ids, 1].reshape(-1, kv_heads, d)[:kv]
            qb = q[int(qo_indptr[b]):int(qo_indptr[b + 1])]

            def score(s, h, i, j, b=b):
                r = (j - i).clamp(-reach, reach) + reach  # q, kv: indices within the request
                return s + bias_now.double()[h, r] + float(shift_now[b])

            o, _ = reference(qb, k, v, score=score, visible=lambda h, i, j, off=kv - qo: j <= i + off)
            outs.append(o)
        return torch.cat(outs)

    o1 = w.run(q, cache)
    assert rel(o1, expected(bias, shift)) < TOLERANCE[torch.float16]
    bias2, shift2 = torch.randn_like(bias), torch.tensor([0.0, 5.0, -3.0], device="cuda")
    variant.bind(bias=bias2, shift=shift2)
    o2 = w.run(q, cache)
    assert rel(o2, expected(bias2, shift2)) < TOLERANCE[torch.float16]
    assert rel(o1, o2) > 1e-2  # the new values were read


def test_batch_decode_wrapper_takes_a_variant_per_request():
    torch.manual_seed(11)
    page, heads, kv_heads, d = 16, 8, 2, 128
    kv_lens = [1, 77, 300, 16]
    pages = [(n + page - 1) // page for n in kv_lens]
    indptr = torch.tensor([0] + list(torch.tensor(pages).cumsum(0)), dtype=torch.int32)
    indices = torch.arange(int(indptr[-1]), dtype=torch.int32)
    last = torch.tensor([(n - 1) % page + 1 for n in kv_lens], dtype=torch.int32)
    cache = torch.randn(int(indptr[-1]), 2, page, kv_heads, d, dtype=torch.float16, device="cuda")
    q = torch.randn(len(kv_lens), heads, d, dtype=torch.float16, device="cuda")
    temp = torch.tensor([1.0, 0.5, 2.0, 0.25], device="cuda")
    variant = attnjit.Variant(score_mod="return s * p.temp_at(b);", params={"temp": temp})
    ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    w = attnjit.BatchDecodeWithPagedKVCacheWrapper(ws)
    w.plan(indptr, indices, last, heads, kv_heads, d, page, variant=variant)
    o = w.run(q, cache)
    for b, kv in enumerate(kv_lens):
        ids = indices[int(indptr[b]):int(indptr[b + 1])].long().cuda()
        k = cache[ids, 0].reshape(-1, kv_heads, d)[:kv]
        v = cache[ids, 1].reshape(-1, kv_heads, d)[:kv]
        o_ref, _ = reference(q[b:b + 1], k, v, score=lambda s, h, i, j, t=float(temp[b]): s * t)
        assert rel(o[b], o_ref[0]) < TOLERANCE[torch.float16], f"request {b}"


def test_snippet_errors_and_refusals_name_the_line_and_the_option():
    q, k, v = qkv(10, 10, seed=12)
    broken = attnjit.Variant(score_mod="float t = s;\nreturn t + undefined_name;")
    with pytest.raises(AttnjitError) as e:
        attnjit.single_prefill_with_kv_cache(q, k, v, variant=broken)
    assert e.value.status == Status.INVALID_ARGUMENT and "score_mod line 2" in str(e.value)
    mask = attnjit.Variant(mask_mod="return kv <= q;")
    with pytest.raises(AttnjitError) as e:
        attnjit.single_prefill_with_kv_cache(q, k, v, causal=True, variant=mask)
    assert e.value.status == Status.INVALID_ARGUMENT and "causal=True" in str(e.value)
    # Two variants of the same shapes: each its own plan (the memo keys by the source), each right.
    scaled = attnjit.Variant(score_mod="return s * p.t;", params={"t": 0.5})
    shifted = attnjit.Variant(score_mod="return s + p.t;", params={"t": 0.5})
    o1 = attnjit.single_prefill_with_kv_cache(q, k, v, variant=scaled)
    o2 = attnjit.single_prefill_with_kv_cache(q, k, v, variant=shifted)
    assert rel(o1, reference(q, k, v, score=lambda s, h, i, j: s * 0.5)[0]) < TOLERANCE[torch.float16]
    assert rel(o2, reference(q, k, v)[0]) < TOLERANCE[torch.float16]  # a constant shift leaves softmax as it is

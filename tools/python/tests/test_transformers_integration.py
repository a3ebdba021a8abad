"""attnjit inside transformers' own model code, on the GPU (issue 33): random-weight models built from
configs shaped like Llama-3 (GQA), Qwen2, Mistral (sliding window shorter than the prompts) and Gemma-2
(soft cap + sliding window, layers of both kinds), seeded, nothing downloaded.

- teacher-forced logits over left-padded prompts: error against sdpa at most 1.5x eager's against sdpa,
  and against float32 eager at most 1.5x the 16-bit eager's (sdpa ignores Gemma-2's soft cap, eager does);
- float32 is refused by name (attnjit computes in float16 / bfloat16), so greedy generation of 64 tokens
  runs in bfloat16: the tokens equal sdpa's, or part at a step where sdpa's own logits nearly tie;
- continuous batching ("paged|attnjit" against "paged|sdpa", chunked prefill included): the same;
- every path ran through attnjit (launch counters) and planned once per step and table, not per layer.
"""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import attnjit.integrations.transformers as tj  # noqa: E402
from attnjit.errors import AttnjitError, Status  # noqa: E402
from transformers import (AutoModelForCausalLM, Gemma2Config, GenerationConfig, LlamaConfig,  # noqa: E402
                          MistralConfig, Qwen2Config)
from transformers.generation.configuration_utils import ContinuousBatchingConfig  # noqa: E402

DEVICE = "cuda"
LENGTHS = [57, 40, 33, 20, 9, 57]  # left-padded to 57; longer than the sliding windows below
COMMON = dict(vocab_size=1024, hidden_size=512, intermediate_size=1024, num_attention_heads=8,
              max_position_embeddings=512, initializer_range=0.08)


def make_config(name):
    if name == "llama":
        return LlamaConfig(**COMMON, num_hidden_layers=3, num_key_value_heads=2)
    if name == "qwen2":
        return Qwen2Config(**COMMON, num_hidden_layers=3, num_key_value_heads=4)
    if name == "mistral":
        return MistralConfig(**COMMON, num_hidden_layers=3, num_key_value_heads=2, sliding_window=24)
    return Gemma2Config(**COMMON, num_hidden_layers=4, num_key_value_heads=4, head_dim=64, sliding_window=24,
                        attn_logit_softcapping=5.0, final_logit_softcapping=30.0, query_pre_attn_scalar=64)


MODELS = ["llama", "qwen2", "mistral", "gemma2"]


def build(name, dtype):
    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = AutoModelForCausalLM.from_config(make_config(name), attn_implementation="sdpa", dtype=torch.float32)
    return model.eval().to(dtype)


def padded_batch():
    torch.manual_seed(1)
    width = max(LENGTHS)
    ids = torch.randint(3, COMMON["vocab_size"], (len(LENGTHS), width), device=DEVICE)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(LENGTHS):
        mask[i, width - n:] = 1
        ids[i, :width - n] = 0
    return ids, mask


def logits(model, impl, ids, mask):
    model.set_attn_implementation(impl)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits.float()


def rel(a, b, keep):
    return ((a - b)[keep].norm() / b[keep].norm()).item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("name", MODELS)
def test_teacher_forced_logits_of_left_padded_prompts(name, dtype):
    ids, mask = padded_batch()
    keep = mask.bool()
    model = build(name, torch.float32)
    reference = logits(model, "eager", ids, mask)  # float32 eager: soft cap and window applied exactly
    model.to(dtype)
    sdpa, eager = logits(model, "sdpa", ids, mask), logits(model, "eager", ids, mask)
    before = tj.launches["prefill"]
    ours = logits(model, "attnjit", ids, mask)
    assert tj.launches["prefill"] - before == model.config.num_hidden_layers
    assert torch.isfinite(ours).all(), "padded rows must stay finite"
    vs_sdpa, eager_vs_sdpa = rel(ours, sdpa, keep), rel(eager, sdpa, keep)
    vs_fp32, eager_vs_fp32 = rel(ours, reference, keep), rel(eager, reference, keep)
    print(f"{name} {dtype}: attnjit/sdpa {vs_sdpa:.3e} eager/sdpa {eager_vs_sdpa:.3e} attnjit/fp32 {vs_fp32:.3e} "
          f"eager/fp32 {eager_vs_fp32:.3e}")
    assert vs_fp32 <= 1.5 * eager_vs_fp32
    if name != "gemma2":  # sdpa drops Gemma-2's soft cap, so only the float32 eager bound means anything there
        assert vs_sdpa <= 1.5 * eager_vs_sdpa


@pytest.mark.parametrize("name, kinds", [("llama", 1), ("mistral", 1), ("gemma2", 2)])
def test_one_plan_per_step_and_layer_kind(name, kinds):
    ids, mask = padded_batch()
    model = build(name, torch.bfloat16)
    tj.clear_plans()
    before_plans, before_runs = tj.plans_made["prefill"], tj.launches["prefill"]
    logits(model, "attnjit", ids, mask)
    assert tj.launches["prefill"] - before_runs == model.config.num_hidden_layers
    assert tj.plans_made["prefill"] - before_plans == kinds  # all layers of a kind share one plan


def test_float32_is_refused_by_name():
    ids, mask = padded_batch()
    model = build("llama", torch.float32)
    with pytest.raises(AttnjitError) as info:
        logits(model, "attnjit", ids, mask)
    assert info.value.status == Status.UNSUPPORTED
    assert "query: dtype torch.float32 is not supported" in info.value.message


def first_difference(a, b):
    """(row, step) of the first token where two [rows, steps] tensors differ, or None."""
    differ = (a != b).nonzero()
    if not differ.numel():
        return None
    steps = differ[:, 1]
    at = int(steps.argmin())
    return int(differ[at, 0]), int(differ[at, 1])


def near_tie_tolerance(model, ids, mask):
    """How far two correct 16-bit backends' logits lie apart here: the largest eager/sdpa difference."""
    keep = mask.bool()
    return 2.0 * (logits(model, "eager", ids, mask) - logits(model, "sdpa", ids, mask))[keep].abs().max().item()


def assert_same_or_near_tie(model, prefix, theirs, ours, tolerance, what):
    """theirs / ours: the tokens sdpa / attnjit generated after `prefix` (a list of token ids). Equal, or the
    first differing token is one sdpa's own logits there nearly tie with its choice."""
    for t, (a, b) in enumerate(zip(theirs, ours)):
        if a == b:
            continue
        sequence = torch.tensor([prefix + theirs[:t]], device=DEVICE)
        step = logits(model, "sdpa", sequence, torch.ones_like(sequence))[0, -1]
        margin = (step[a] - step[b]).item()
        assert margin <= tolerance, (f"{what}: token {t} is {b} (attnjit) vs {a} (sdpa), sdpa's logit margin "
                                     f"{margin:.4f} > {tolerance:.4f}")
        return
    assert len(theirs) == len(ours), what


@pytest.mark.parametrize("name", MODELS)
def test_greedy_generation_matches_sdpa(name):
    ids, mask = padded_batch()
    model = build(name, torch.bfloat16)
    tolerance = near_tie_tolerance(model, ids, mask)
    generated = {}
    for impl in ("sdpa", "attnjit"):
        model.set_attn_implementation(impl)
        before = tj.launches["decode"]
        with torch.no_grad():
            generated[impl] = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=64,
                                             min_new_tokens=64, do_sample=False, pad_token_id=0)
    assert tj.launches["decode"] - before == 63 * model.config.num_hidden_layers  # the first token is prefill's
    width = ids.shape[1]
    for row, n in enumerate(LENGTHS):
        prefix = ids[row, width - n:].tolist()
        assert_same_or_near_tie(model, prefix, generated["sdpa"][row, width:].tolist(),
                                generated["attnjit"][row, width:].tolist(), tolerance, f"{name} row {row}")


@pytest.mark.parametrize("name", MODELS)
def test_continuous_batching_matches_paged_sdpa(name):
    ids, mask = padded_batch()
    model = build(name, torch.bfloat16)
    tolerance = near_tie_tolerance(model, ids, mask)
    width = ids.shape[1]
    prompts = [ids[row, width - n:].tolist() for row, n in enumerate(LENGTHS)]
    config = GenerationConfig(max_new_tokens=32, do_sample=False, eos_token_id=None, pad_token_id=0)
    # blocks of 16 and at most 48 tokens a step: the 57-token prompts are prefilled in chunks that read the
    # cache, and decode steps read whole blocks in place
    cb_config = ContinuousBatchingConfig(block_size=16, num_blocks=64, max_batch_tokens=48, use_cuda_graph=False)
    outputs, before = {}, dict(tj.launches)
    for impl in ("paged|sdpa", "paged|attnjit"):
        model.set_attn_implementation(impl)
        with torch.no_grad():
            result = model.generate_batch(prompts, generation_config=config, continuous_batching_config=cb_config,
                                          progress_bar=False, warmup=False)
        assert model.config._attn_implementation == impl  # no switch to another backend on the way
        outputs[impl] = [result[f"req_{i}"].generated_tokens for i in range(len(prompts))]
    ran = {k: tj.launches[k] - before.get(k, 0) for k in ("paged_in_place", "paged_gathered")}
    assert sum(ran.values()) > 0, ran
    if name in ("llama", "qwen2", "gemma2"):
        assert ran["paged_in_place"] > 0, ran  # full-attention layers read the cache where it lies
    for i, prompt in enumerate(prompts):
        assert len(outputs["paged|attnjit"][i]) == 32
        assert_same_or_near_tie(model, prompt, outputs["paged|sdpa"][i], outputs["paged|attnjit"][i], tolerance,
                                f"{name} request {i}")


def test_a_custom_four_d_mask_is_honoured():
    """A mask no key range describes (two sequences packed in one row) goes to attnjit as a custom mask."""
    model = build("llama", torch.bfloat16)
    torch.manual_seed(2)
    n = 40
    ids = torch.randint(3, COMMON["vocab_size"], (2, n), device=DEVICE)
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool, device=DEVICE))
    packed = causal.clone()
    packed[17:, :17] = False
    mask = torch.stack([packed, causal])[:, None]
    keep = torch.ones(2, n, dtype=torch.bool, device=DEVICE)
    sdpa, eager = logits(model, "sdpa", ids, mask), logits(model, "eager", ids, mask)
    before = tj.launches["prefill_custom_mask"]
    ours = logits(model, "attnjit", ids, mask)
    assert tj.launches["prefill_custom_mask"] - before == model.config.num_hidden_layers
    assert rel(ours, sdpa, keep) <= 1.5 * rel(eager, sdpa, keep)


def reference_decode(q, k, v, starts, scaling):
    """float64 attention of q [batch, heads, 1, dim] over keys [starts[b], kv_len) of k / v [batch, kv_heads,
    kv_len, dim] (GQA: query head h reads KV head h // group); [batch, 1, heads, dim]."""
    group = q.shape[1] // k.shape[1]
    out = torch.zeros(q.shape[0], 1, q.shape[1], q.shape[3], dtype=torch.float64, device=q.device)
    for b, s in enumerate(starts):
        keys = k[b, :, s:].double().repeat_interleave(group, 0)
        values = v[b, :, s:].double().repeat_interleave(group, 0)
        weights = torch.softmax(q[b].double() @ keys.transpose(1, 2) * scaling, dim=-1)  # [heads, 1, keys]
        out[b] = (weights @ values).transpose(0, 1)
    return out


@pytest.mark.parametrize("layout", ["hnd", "nhd-storage", "left-padded"])
def test_decode_calls_of_one_layout_each_read_their_own_tensors(layout):
    """Layers of a step share a kept preparation and launch: each call must still read its own q, K, V and
    write its own output (one plan for all of them)."""
    class Module:
        is_causal = True

    batch, heads, kv_heads, dim, kv_len, scaling = 5, 8, 2, 64, 37, 0.3
    starts = [0, 3, 10, 36, 5] if layout == "left-padded" else [0] * batch
    mask = None
    if layout == "left-padded":  # one mask object for all layers of a step, as transformers passes it
        mask = (torch.arange(kv_len, device=DEVICE)[None, :] >= torch.tensor(starts, device=DEVICE)[:, None])
        mask = mask[:, None, None, :]
    torch.manual_seed(3)
    before_plans, before_runs = tj.plans_made["decode"], tj.launches["decode"]
    outputs = []
    for _ in range(3):
        q = torch.randn(batch, 1, heads, dim, device=DEVICE, dtype=torch.bfloat16).transpose(1, 2)
        if layout == "nhd-storage":
            k, v = (torch.randn(batch, kv_len, kv_heads, dim, device=DEVICE, dtype=torch.bfloat16).transpose(1, 2)
                    for _ in range(2))
        else:
            k, v = (torch.randn(batch, kv_heads, kv_len, dim, device=DEVICE, dtype=torch.bfloat16) for _ in range(2))
        with torch.no_grad():
            out, _ = tj.attnjit_attention_forward(Module(), q, k, v, mask, dropout=0.0, scaling=scaling)
        expected = reference_decode(q, k, v, starts, scaling)
        assert out.shape == (batch, 1, heads, dim) and out.dtype == torch.bfloat16
        error = ((out.double() - expected).norm() / expected.norm()).item()
        assert error < 1e-2, f"{layout}: relative error {error:.3e}"
        outputs.append(out)
    assert tj.launches["decode"] - before_runs == 3
    assert tj.plans_made["decode"] - before_plans <= 1  # one plan for the layout (none if one was kept)
    assert not torch.equal(outputs[0], outputs[1])  # each call wrote its own output

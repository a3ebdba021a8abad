"""attnjit inside transformers' own model code, on the GPU (issue 33): random-weight models built from
configs shaped like Llama-3 (GQA), Qwen2, Mistral (sliding window shorter than the prompts) and Gemma-2
(soft cap + sliding window, layers of both kinds), seeded, nothing downloaded.

- teacher-forced logits over left-padded prompts: error against sdpa at most 1.5x eager's against sdpa,
  and against float32 eager at most 1.5x the 16-bit eager's (sdpa ignores Gemma-2's soft cap, eager does);
- float32 is refused by name (attnjit computes in float16 / bfloat16), so greedy generation of 64 tokens
  runs in bfloat16: the tokens equal sdpa's, or part at a step where sdpa's own logits nearly tie;
- continuous batching ("paged|attnjit" against "paged|sdpa", chunked prefill included): the same;
- teacher-forced decode steps after a left-padded prefill (each step's mask asked in the kernel), with the
  DynamicCache's sliding layers and with full layers whose masks carry the window: the prefill's bounds;
- decode calls against float64: masks with holes, a request that sees no key (0), a batch-1 mask, an additive
  mask, a new mask on a kept plan (a bind, no plan); decode steps make no host sync (torch's sync debug mode);
- decode steps as the DynamicCache makes them (K/V one key longer each step) on one plan per capacity: the
  same plan past its planned rows' end, across a capacity, back to a shorter length, with a window, with
  split requests (batch 1), K and V in different layouts;
- every path ran through attnjit (launch counters) and planned once per step and table (prefill) or once
  per capacity and layer kind (decode), never per layer.
"""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests need it")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import attnjit.integrations.transformers as tj  # noqa: E402
from attnjit.errors import AttnjitError, Status  # noqa: E402
from attnjit.integrations.transformers import _attention, _capacity  # noqa: E402
from transformers import (AutoModelForCausalLM, DynamicCache, Gemma2Config, GenerationConfig,  # noqa: E402
                          LlamaConfig, MistralConfig, Qwen2Config)
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
    tj.clear_plans()
    for impl in ("sdpa", "attnjit"):
        model.set_attn_implementation(impl)
        before, plans, writes = dict(tj.launches), tj.plans_made["decode"], tj.lengths_written["decode"]
        with torch.no_grad():
            generated[impl] = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=64,
                                             min_new_tokens=64, do_sample=False, pad_token_id=0)
    ran = {k: tj.launches[k] - before.get(k, 0) for k in ("decode", "decode_mask_mod")}
    # the first token is prefill's; left padding gives every step a mask, which the kernel asks
    assert ran == {"decode": 0, "decode_mask_mod": 63 * model.config.num_hidden_layers}, ran
    width = ids.shape[1]
    # a plan per capacity and layer kind (full layers' keys grow over 58 to 120: two capacities; a sliding
    # layer's stay), at most one length write per step and kind: never per layer
    kinds, capacities = layer_kinds(model), len({_capacity.capacity(n) for n in range(width + 1, width + 64)})
    assert kinds <= tj.plans_made["decode"] - plans <= kinds * capacities
    assert kinds <= tj.lengths_written["decode"] - writes <= 63 * kinds
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
    path = "decode" if mask is None else "decode_mask_mod"
    before_plans, before_runs = tj.plans_made["decode"], tj.launches[path]
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
    assert tj.launches[path] - before_runs == 3
    assert tj.plans_made["decode"] - before_plans <= 1  # one plan for the layout (none if one was kept)
    assert not torch.equal(outputs[0], outputs[1])  # each call wrote its own output


def layer_kinds(model):
    return len(set(getattr(model.config, "layer_types", None) or ["one"]))


def decode_step_logits(model, impl, ids, mask, tokens, cache_config):
    """Logits [batch, steps, vocab] (float32) of teacher-forced decode steps after a left-padded prefill: tokens
    [batch, steps] fed one a step through a DynamicCache (cache_config: the model's, whose sliding layers keep
    window - 1 keys; None: full layers, whose sliding masks carry the window), positions as generate() makes."""
    model.set_attn_implementation(impl)
    cache = DynamicCache(config=cache_config)
    seen, out = mask, []
    with torch.no_grad():
        model(input_ids=ids, attention_mask=seen, position_ids=(seen.cumsum(-1) - 1).clamp(min=0),
              past_key_values=cache, use_cache=True)
        for t in range(tokens.shape[1]):
            seen = torch.cat([seen, torch.ones_like(seen[:, :1])], dim=1)
            step = model(input_ids=tokens[:, t:t + 1], attention_mask=seen, position_ids=seen.sum(-1, keepdim=True) - 1,
                         past_key_values=cache, use_cache=True)
            out.append(step.logits[:, -1].float())
    return torch.stack(out, dim=1)


@pytest.mark.parametrize("cache", ["model-cache", "full-layers"])
@pytest.mark.parametrize("name", MODELS)
def test_teacher_forced_decode_steps_of_left_padded_prompts(name, cache):
    ids, mask = padded_batch()
    torch.manual_seed(4)
    steps = 12
    tokens = torch.randint(3, COMMON["vocab_size"], (len(LENGTHS), steps), device=DEVICE)
    model = build(name, torch.float32)
    config = model.config if cache == "model-cache" else None
    reference = decode_step_logits(model, "eager", ids, mask, tokens, config)
    model.to(torch.bfloat16)
    sdpa = decode_step_logits(model, "sdpa", ids, mask, tokens, config)
    eager = decode_step_logits(model, "eager", ids, mask, tokens, config)
    tj.clear_plans()
    before, plans, binds = dict(tj.launches), tj.plans_made["decode"], tj.masks_bound["decode"]
    writes = tj.lengths_written["decode"]
    ours = decode_step_logits(model, "attnjit", ids, mask, tokens, config)
    layers, kinds = model.config.num_hidden_layers, layer_kinds(model)
    ran = {k: tj.launches[k] - before.get(k, 0) for k in ("decode", "decode_mask_mod")}
    assert ran == {"decode": 0, "decode_mask_mod": steps * layers}, ran
    # one bind per step and layer kind (the layers of a kind share the step's mask); one plan per capacity
    # and kind (the keys grow over 58 to 69: capacities 64 and 128) and one length write per step and kind,
    # fewer where a sliding layer's keys stay at its window
    width = ids.shape[1]
    capacities = len({_capacity.capacity(n) for n in range(width + 1, width + steps + 1)})
    assert tj.masks_bound["decode"] - binds == steps * kinds
    planned, written = tj.plans_made["decode"] - plans, tj.lengths_written["decode"] - writes
    if cache == "full-layers":  # every layer sees the growing keys
        assert (planned, written) == (kinds * capacities, steps * kinds)
    else:
        assert kinds <= planned <= kinds * capacities and kinds <= written <= steps * kinds
    assert torch.isfinite(ours).all()
    every = torch.ones(ours.shape[:2], dtype=torch.bool, device=DEVICE)
    vs_sdpa, eager_vs_sdpa = rel(ours, sdpa, every), rel(eager, sdpa, every)
    vs_fp32, eager_vs_fp32 = rel(ours, reference, every), rel(eager, reference, every)
    print(f"{name} {cache}: attnjit/sdpa {vs_sdpa:.3e} eager/sdpa {eager_vs_sdpa:.3e} attnjit/fp32 {vs_fp32:.3e} "
          f"eager/fp32 {eager_vs_fp32:.3e}")
    assert vs_fp32 <= 1.5 * eager_vs_fp32
    if name != "gemma2":  # sdpa drops Gemma-2's soft cap
        assert vs_sdpa <= 1.5 * eager_vs_sdpa


class CausalModule:
    is_causal = True


def decode_inputs(batch, heads, kv_heads, dim, kv_len, dtype, seed):
    """q [batch, heads, 1, dim] (a view of [batch, 1, heads, dim], as the model's), k / v [batch, kv_heads,
    kv_len, dim] (the DynamicCache's layout)."""
    torch.manual_seed(seed)
    q = torch.randn(batch, 1, heads, dim, device=DEVICE, dtype=dtype).transpose(1, 2)
    k, v = (torch.randn(batch, kv_heads, kv_len, dim, device=DEVICE, dtype=dtype) for _ in range(2))
    return q, k, v


def reference_masked_decode(q, k, v, keep, scaling, softcap=None):
    """float64 attention of q [batch, heads, 1, dim] over the keys keep [batch, kv_len] (bool) marks, with the
    soft cap on the scaled scores; a request that keeps no key gets 0. [batch, 1, heads, dim]."""
    group = q.shape[1] // k.shape[1]
    out = torch.zeros(q.shape[0], 1, q.shape[1], q.shape[3], dtype=torch.float64, device=q.device)
    for b in range(q.shape[0]):
        cols = keep[b].nonzero().flatten()
        if cols.numel() == 0:
            continue
        keys = k[b][:, cols].double().repeat_interleave(group, 0)
        values = v[b][:, cols].double().repeat_interleave(group, 0)
        scores = q[b].double() @ keys.transpose(1, 2) * scaling  # [heads, 1, keys]
        if softcap is not None:
            scores = softcap * torch.tanh(scores / softcap)
        out[b] = (torch.softmax(scores, dim=-1) @ values).transpose(0, 1)
    return out


def holed_keep(batch, kv_len):
    """[batch, kv_len] keep rows no key range describes: all keys, a hole in the middle, left padding and a hole,
    the last key only, no key at all (then again all keys for any further request)."""
    keep = torch.ones(batch, kv_len, dtype=torch.bool, device=DEVICE)
    keep[1, kv_len // 3:2 * kv_len // 3] = False
    keep[2, :kv_len // 4] = False
    keep[2, kv_len // 2:kv_len // 2 + 3] = False
    keep[3, :-1] = False
    keep[4] = False
    return keep


def assert_decode_matches(out, q, k, v, keep, scaling, softcap=None, what=""):
    expected = reference_masked_decode(q, k, v, keep, scaling, softcap)
    assert out.shape == expected.shape and out.dtype == q.dtype
    assert torch.isfinite(out).all(), what
    error = ((out.double() - expected).norm() / expected.norm()).item()
    assert error < 1e-2, f"{what}: relative error {error:.3e}"
    seen_none = ~keep.any(dim=1)
    assert (out[seen_none] == 0).all(), f"{what}: a request that sees no key must come out 0"


SHAPES = [(8, 2, 128, None), (8, 8, 64, None), (16, 8, 256, 30.0)]  # GQA 4 (tensor cores), MHA, Gemma-2-like


@pytest.mark.parametrize("form", ["bool", "additive", "additive-min"])
@pytest.mark.parametrize("window", [None, 16])
@pytest.mark.parametrize("kv_len", [37, 1500])
@pytest.mark.parametrize("heads, kv_heads, dim, softcap", SHAPES, ids=["gqa4-d128", "mha-d64", "d256-softcap"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_a_decode_mask_with_holes_is_computed_exactly(dtype, heads, kv_heads, dim, softcap, kv_len, window, form):
    """Any decode mask is asked key by key in the kernel: holes, a lone last key, a request that sees nothing.
    The mask decides every key, as sdpa's does (a sliding layer's mask carries its window)."""
    batch, scaling = 5, dim ** -0.5
    q, k, v = decode_inputs(batch, heads, kv_heads, dim, kv_len, dtype, seed=6)
    keep = holed_keep(batch, kv_len)
    mask = keep[:, None, None, :]
    if form == "additive":
        mask = torch.where(mask, 0.0, float("-inf")).to(dtype)
    elif form == "additive-min":
        mask = torch.where(mask, 0.0, torch.finfo(dtype).min).to(dtype)
    before = tj.launches["decode_mask_mod"]
    with torch.no_grad():
        out, _ = tj.attnjit_attention_forward(CausalModule(), q, k, v, mask, dropout=0.0, scaling=scaling,
                                              sliding_window=window, softcap=softcap)
    assert tj.launches["decode_mask_mod"] - before == 1
    assert_decode_matches(out, q, k, v, keep, scaling, softcap, f"{form} window={window}")


def test_a_batch_one_decode_mask_serves_every_request():
    batch, heads, kv_heads, dim, kv_len, scaling = 4, 8, 2, 128, 300, 0.09
    q, k, v = decode_inputs(batch, heads, kv_heads, dim, kv_len, torch.bfloat16, seed=7)
    keep = holed_keep(5, kv_len)[2:3]  # left padding and a hole, for every request
    with torch.no_grad():
        out, _ = tj.attnjit_attention_forward(CausalModule(), q, k, v, keep[:, None, None, :], dropout=0.0,
                                              scaling=scaling)
    assert_decode_matches(out, q, k, v, keep.expand(batch, kv_len), scaling, what="batch-1 mask")


def test_a_new_mask_on_a_kept_plan_is_a_bind_that_the_next_launch_reads():
    """Plans read the variant's bound mask at each run, through the decode launch's direct C call too."""
    batch, heads, kv_heads, dim, kv_len, scaling = 5, 8, 2, 128, 200, 0.09
    q, k, v = decode_inputs(batch, heads, kv_heads, dim, kv_len, torch.bfloat16, seed=8)
    first = holed_keep(batch, kv_len)
    second = first.flip(0)  # the same rows, other requests
    tj.clear_plans()
    plans, binds = tj.plans_made["decode"], tj.masks_bound["decode"]
    outputs = []
    for keep in (first, second, first):
        with torch.no_grad():
            out, _ = tj.attnjit_attention_forward(CausalModule(), q, k, v, keep[:, None, None, :].clone(),
                                                  dropout=0.0, scaling=scaling)
        assert_decode_matches(out, q, k, v, keep, scaling, what=f"mask {len(outputs)}")
        outputs.append(out)
    assert tj.plans_made["decode"] - plans == 1  # the plan depends on the shapes only
    assert tj.masks_bound["decode"] - binds == 3
    assert not torch.equal(outputs[0], outputs[1])


def test_decode_steps_make_no_host_sync():
    """Steps as generate() makes them (each a new mask object, K/V one key longer, three layers sharing them)
    under torch's sync debug mode "error" after the first: no mask analysis, no host read; a step's length
    write is a device fill, and the plan a new capacity needs (64 -> 128 keys) is host work only."""
    batch, heads, kv_heads, dim, scaling, layers = 4, 8, 2, 128, 0.09, 3
    starts = torch.tensor([0, 5, 11, 30], device=DEVICE)
    steps = []
    for kv_len in range(60, 68):
        keep = torch.arange(kv_len, device=DEVICE)[None, :] >= starts[:, None]
        keep[1, 20] = False  # a hole too
        calls = [decode_inputs(batch, heads, kv_heads, dim, kv_len, torch.bfloat16, seed=kv_len * 10 + i)
                 for i in range(layers)]
        steps.append((keep, calls))
    tj.clear_plans()
    torch.cuda.synchronize()
    plans, binds, before = tj.plans_made["decode"], tj.masks_bound["decode"], tj.launches["decode_mask_mod"]
    writes = tj.lengths_written["decode"]
    outputs = []
    try:
        for i, (keep, calls) in enumerate(steps):
            mask = keep[:, None, None, :]  # one mask object per step, as transformers passes it to every layer
            if i == 1:  # the first step compiled or loaded the kernel
                torch.cuda.set_sync_debug_mode("error")
            with torch.no_grad():
                outputs.append([tj.attnjit_attention_forward(CausalModule(), q, k, v, mask, dropout=0.0,
                                                             scaling=scaling)[0] for q, k, v in calls])
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert tj.plans_made["decode"] - plans == 2  # once per capacity (64, then 128), not per step or layer
    assert tj.lengths_written["decode"] - writes == len(steps)  # once per step, by its first layer
    assert tj.masks_bound["decode"] - binds == len(steps)
    assert tj.launches["decode_mask_mod"] - before == len(steps) * layers
    for (keep, calls), outs in zip(steps, outputs):
        for (q, k, v), out in zip(calls, outs):
            assert_decode_matches(out, q, k, v, keep, scaling, what=f"kv_len {keep.shape[1]}")


def window_keep(batch, kv_len, window):
    """[batch, kv_len] keep of a query at the last position: the window's keys up to it (every key: None)."""
    first = 0 if window is None else max(0, kv_len - window)
    return (torch.arange(kv_len, device=DEVICE) >= first)[None, :].expand(batch, kv_len)


@pytest.mark.parametrize("window, softcap", [(None, None), (50, None), (None, 20.0)], ids=["full", "window", "softcap"])
def test_one_step_plan_serves_growing_keys_across_capacities(window, softcap):
    """Steps as the DynamicCache makes them (new K/V one key longer, two layers each) on one plan per capacity:
    its planned rows run past the keys (rows clamped in the kernel), a new capacity plans again, a shorter
    length within the capacity (a new generate()) is a write that no stale length survives."""
    from attnjit.integrations.transformers import _decode_steps

    batch, heads, kv_heads, dim, scaling, layers = 3, 8, 2, 128, 0.08, 2
    lengths = list(range(120, 134)) + [150, 140, 141, 100]  # capacities 128, 192, 192, 128
    tj.clear_plans()
    plans, writes, before = tj.plans_made["decode"], tj.lengths_written["decode"], tj.launches["decode"]
    seen = set()
    for step, kv_len in enumerate(lengths):
        keep = window_keep(batch, kv_len, window)
        for layer in range(layers):
            q, k, v = decode_inputs(batch, heads, kv_heads, dim, kv_len, torch.bfloat16, seed=100 * step + layer)
            with torch.no_grad():
                out, _ = tj.attnjit_attention_forward(CausalModule(), q, k, v, None, dropout=0.0, scaling=scaling,
                                                      sliding_window=window, softcap=softcap)
            assert_decode_matches(out, q, k, v, keep, scaling, softcap, f"kv_len {kv_len} layer {layer}")
            seen.update(id(plan) for plan in _decode_steps._step_plans.values())
    assert len(seen) == 1  # one plan object served every step and layer
    assert tj.launches["decode"] - before == len(lengths) * layers
    assert tj.plans_made["decode"] - plans == 3  # 128, 192, then 128 again: never per step or layer
    assert tj.lengths_written["decode"] - writes == len(lengths)


@pytest.mark.parametrize("kv_len", [1025, 4097])
def test_a_split_request_is_exact_when_its_last_chunk_runs_past_its_keys(kv_len):
    """One request fills a small part of the GPU, so the plan cuts its capacity's rows into chunks: the last one
    runs past kv_len (the kernel clamps it) and the in-kernel merge takes them all."""
    heads, kv_heads, dim, scaling = 32, 8, 128, 128 ** -0.5
    tj.clear_plans()
    for step in range(3):
        q, k, v = decode_inputs(1, heads, kv_heads, dim, kv_len + step, torch.bfloat16, seed=9 + step)
        with torch.no_grad():
            out, _ = tj.attnjit_attention_forward(CausalModule(), q, k, v, None, dropout=0.0, scaling=scaling)
        assert_decode_matches(out, q, k, v, window_keep(1, kv_len + step, None), scaling, what=f"{kv_len + step}")


def test_keys_and_values_of_different_layouts_are_read_in_place():
    """The page table is one page per request, so K and V need no common layout: neither is copied."""
    batch, heads, kv_heads, dim, kv_len, scaling = 4, 8, 2, 64, 77, 0.125
    torch.manual_seed(11)
    q = torch.randn(batch, 1, heads, dim, device=DEVICE, dtype=torch.float16).transpose(1, 2)
    k = torch.randn(batch, kv_heads, kv_len, dim, device=DEVICE, dtype=torch.float16)  # the cache's
    v = torch.randn(batch, kv_len, kv_heads, dim, device=DEVICE, dtype=torch.float16).transpose(1, 2)  # NHD storage
    tj.clear_plans()
    with torch.no_grad():
        out, _ = tj.attnjit_attention_forward(CausalModule(), q, k, v, None, dropout=0.0, scaling=scaling)
    assert_decode_matches(out, q, k, v, window_keep(batch, kv_len, None), scaling, what="mixed layouts")
    assert [p.copy for p in _attention._prepared.values()] == [False]

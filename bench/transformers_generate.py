"""transformers generation with attnjit against sdpa, in one process (issue 33, item 3).

A random-weight model with Llama-3-8B-shaped layers (hidden 4096, 32 heads, 8 KV heads, head_dim 128,
MLP 14336, vocabulary 128256; --layers of them), bfloat16, generates --new-tokens greedily for --batch
prompts of --prompt-len tokens:
- generate(): attn_implementation "attnjit" against "sdpa";
- continuous batching (generate_batch): "paged|attnjit" against transformers' "paged|sdpa", at its own
  (smaller) --cb-batch / --cb-prompt-len / --cb-new-tokens, which the printout and the JSON name;
- one decode step's attention call alone (the model's own attention module, batch x 1 query rows over
  --prompt-len + --new-tokens / 2 keys): host microseconds per call and device microseconds per call.
Each contender runs once to warm up (attnjit's JIT compiles there), then --runs times alternating with the
other; tokens/s = generated tokens / wall time (synchronized), the median reported with every run's
seconds, the speed-up, how many generated tokens agree with sdpa's, and the host time spent inside the
attention function per decode step (a timer around each call, no synchronization; a run's total, its
prefill calls included, over its decode steps). JSON to --out (written
after each part), with the command line. A part whose warm-up takes over --part-budget seconds skips its
timed runs and says so.

    python3 bench/transformers_generate.py --out /tmp/transformers_generate.json
"""

import argparse
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig
from transformers.generation.configuration_utils import ContinuousBatchingConfig

import attnjit
import attnjit.integrations.transformers as tj


def build(layers):
    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=8192,
                         rope_theta=500000.0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    return model.eval()


def timed(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start, result


class AttentionTimer:
    """Host seconds spent inside each backend's attention function (registered around it while timing)."""

    def __init__(self, names):
        from transformers import AttentionInterface

        self.interface = AttentionInterface
        # "eager" is the models' own default, not in the mapping: it goes untimed (None)
        self.originals = {name: AttentionInterface._global_mapping[name] for name in names
                          if name in AttentionInterface._global_mapping}
        self.seconds = dict.fromkeys(self.originals, 0.0)
        self.calls = dict.fromkeys(self.originals, 0)
        for name, function in self.originals.items():
            AttentionInterface.register(name, self._timed(name, function))

    def _timed(self, name, function):
        def timed_attention(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1
        return timed_attention

    def reset(self):
        for name in self.seconds:
            self.seconds[name], self.calls[name] = 0.0, 0

    def restore(self):
        for name, function in self.originals.items():
            self.interface.register(name, function)


def run_generate(model, impl, ids, new_tokens):
    model.set_attn_implementation(impl)
    with torch.no_grad():
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)[:, ids.shape[1]:]


def run_batch(model, impl, prompts, new_tokens, cb_config):
    model.set_attn_implementation(impl)
    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        result = model.generate_batch(prompts, generation_config=config, continuous_batching_config=cb_config,
                                      progress_bar=False, warmup=False)
    assert model.config._attn_implementation == impl, model.config._attn_implementation
    return torch.tensor([result[f"req_{i}"].generated_tokens for i in range(len(prompts))])


def compare(name, contenders, call, runs, tokens, steps, budget):
    """{impl: {tokens_per_s, seconds, median, attention_host_ms_per_step, ...}, speedup, agreement} for
    call(impl) alternating over runs; steps: decode steps per run (for the host time per step)."""
    outputs, rates, seconds = {}, {impl: [] for impl in contenders}, {impl: [] for impl in contenders}
    timer = AttentionTimer(contenders)
    result = {impl: {} for impl in contenders}
    try:
        for impl in contenders:  # warm-up: JIT compiles, allocator, cuBLAS
            warm, _ = timed(lambda: call(impl, warm=True))
            result[impl]["warmup_s"] = warm
            print(f"{name}: {impl} warm-up {warm:.2f} s", flush=True)
            if warm > budget:
                result["skipped"] = f"{impl}'s warm-up took {warm:.1f} s > --part-budget {budget} s"
                print(f"{name}: skipped, {result['skipped']}", flush=True)
                return result
        timer.reset()
        for run in range(runs):
            for impl in contenders:
                took, outputs[impl] = timed(lambda: call(impl, warm=False))
                seconds[impl].append(took)
                rates[impl].append(tokens / took)
                print(f"{name}: run {run} {impl} {took:.3f} s, {tokens / took:.0f} tok/s", flush=True)
    finally:
        timer.restore()
    base, ours = contenders
    for impl in contenders:
        result[impl].update(tokens_per_s=rates[impl], seconds=seconds[impl], median=statistics.median(rates[impl]),
                            attention_calls_per_run=timer.calls.get(impl, 0) / runs,
                            attention_host_ms_per_step=1e3 * timer.seconds[impl] / (runs * steps)
                            if impl in timer.seconds else None)
    result["speedup"] = result[ours]["median"] / result[base]["median"]
    result["token_agreement"] = (outputs[base] == outputs[ours]).float().mean().item()
    host = ", ".join(f"{impl} {result[impl]['attention_host_ms_per_step']:.3f}" for impl in contenders
                     if impl in timer.seconds)
    print(f"{name}: {base} {result[base]['median']:.0f} tok/s, {ours} {result[ours]['median']:.0f} tok/s, "
          f"x{result['speedup']:.3f}, tokens agreeing {result['token_agreement']:.3f}; host ms per decode step "
          f"inside attention: {host}", flush=True)
    return result


def attention_call(model, batch, kv_len, reps=200):
    """One decode step's attention call of layer 0, sdpa vs attnjit: host us per call (the call returns
    without waiting) and device us per call (reps back to back between two events)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    attn = model.model.layers[0].self_attn
    config = model.config
    heads, kv_heads, dim = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    torch.manual_seed(2)
    q = torch.randn(batch, 1, heads, dim, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(batch, kv_heads, kv_len, dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    functions = {"sdpa": sdpa_attention_forward, "attnjit": tj.attnjit_attention_forward}
    result = {"batch": batch, "kv_len": kv_len}
    with torch.no_grad():
        outs = {name: f(attn, q, k, v, None, dropout=0.0, scaling=attn.scaling)[0] for name, f in functions.items()}
        for name, f in functions.items():
            for _ in range(10):
                f(attn, q, k, v, None, dropout=0.0, scaling=attn.scaling)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            host = time.perf_counter()
            start.record()
            for _ in range(reps):
                f(attn, q, k, v, None, dropout=0.0, scaling=attn.scaling)
            end.record()
            host = time.perf_counter() - host
            end.synchronize()
            result[name] = {"host_us_per_call": 1e6 * host / reps,
                            "device_us_per_call": 1e3 * start.elapsed_time(end) / reps}
    a, b = outs["attnjit"].float(), outs["sdpa"].float()
    result["rel_diff_vs_sdpa"] = ((a - b).norm() / b.norm()).item()
    print(f"attention call (batch {batch}, {kv_len} keys): sdpa host {result['sdpa']['host_us_per_call']:.1f} us, "
          f"device {result['sdpa']['device_us_per_call']:.1f} us; attnjit host "
          f"{result['attnjit']['host_us_per_call']:.1f} us, device {result['attnjit']['device_us_per_call']:.1f} us; "
          f"rel diff {result['rel_diff_vs_sdpa']:.2e}", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--prompt-len", type=int, default=1024)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cb-batch", type=int, default=32, help="continuous batching's requests")
    parser.add_argument("--cb-prompt-len", type=int, default=256, help="continuous batching's prompt length")
    parser.add_argument("--cb-new-tokens", type=int, default=64, help="continuous batching's new tokens")
    parser.add_argument("--cb-runs", type=int, default=2)
    parser.add_argument("--block-size", type=int, default=256, help="continuous batching's cache block size")
    parser.add_argument("--max-batch-tokens", type=int, default=4096, help="continuous batching's step budget")
    parser.add_argument("--part-budget", type=float, default=90.0,
                        help="seconds a warm-up may take before its part's timed runs are skipped")
    parser.add_argument("--skip", choices=["generate", "continuous_batching", "attention_call"], action="append",
                        default=[])
    parser.add_argument("--out", required=True, help="JSON file to write")
    args = parser.parse_args()

    model = build(args.layers)
    torch.manual_seed(1)
    ids = torch.randint(3, model.config.vocab_size, (args.batch, args.prompt_len), device="cuda")
    report = {"command": " ".join([sys.executable] + sys.argv), "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "transformers": transformers.__version__, "attnjit": attnjit.version(),
              "args": vars(args)}

    def write():
        report["attnjit_launches"] = dict(tj.launches)
        report["attnjit_plans"] = dict(tj.plans_made)
        report["attnjit_length_writes"] = dict(tj.lengths_written)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)

    if "attention_call" not in args.skip:
        report["attention_call"] = attention_call(model, args.batch, args.prompt_len + args.new_tokens // 2)
        write()
    if "generate" not in args.skip:
        print(f"generate: batch {args.batch}, {args.prompt_len}-token prompts, {args.new_tokens} new tokens, "
              f"{args.layers} layers", flush=True)
        report["generate"] = compare(
            "generate", ("sdpa", "attnjit"),
            lambda impl, warm: run_generate(model, impl, ids, 16 if warm else args.new_tokens), args.runs,
            args.batch * args.new_tokens, args.new_tokens - 1, args.part_budget)
        write()
    if "continuous_batching" not in args.skip:
        print(f"continuous_batching: batch {args.cb_batch}, {args.cb_prompt_len}-token prompts, "
              f"{args.cb_new_tokens} new tokens (smaller than generate's), block size {args.block_size}, "
              f"max batch tokens {args.max_batch_tokens}", flush=True)
        prompts = ids[:args.cb_batch, :args.cb_prompt_len].tolist()
        blocks = args.cb_batch * -(-(args.cb_prompt_len + args.cb_new_tokens) // args.block_size) + 8
        cb_config = ContinuousBatchingConfig(block_size=args.block_size, num_blocks=blocks,
                                             max_batch_tokens=args.max_batch_tokens, use_cuda_graph=False)
        report["continuous_batching"] = compare(
            "continuous_batching", ("paged|sdpa", "paged|attnjit"),
            lambda impl, warm: run_batch(model, impl, prompts, 4 if warm else args.cb_new_tokens, cb_config),
            args.cb_runs, args.cb_batch * args.cb_new_tokens, args.cb_new_tokens, args.part_budget)
        write()
    write()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

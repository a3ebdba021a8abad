"""transformers generation with attnjit against sdpa, in one process (issue 33, item 3).

A random-weight model with Llama-3-8B-shaped layers (hidden 4096, 32 heads, 8 KV heads, head_dim 128,
MLP 14336, vocabulary 128256; --layers of them), bfloat16, generates --new-tokens greedily for --batch
prompts of --prompt-len tokens:
- generate(): attn_implementation "attnjit" against "sdpa";
- continuous batching (generate_batch): "paged|attnjit" against transformers' "paged|sdpa".
Each contender runs once to warm up (attnjit's JIT compiles there), then --runs times alternating with the
other; tokens/s = generated tokens / wall time (synchronized), the median reported with every run, the
speed-up, and how many generated tokens agree with sdpa's. JSON to --out, with the command line.

    python3 tools/bench/transformers_generate.py --out /tmp/transformers_generate.json
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


def compare(name, contenders, call, runs, tokens):
    """{impl: {tokens_per_s: [...], median}, speedup, agreement} for call(impl) alternating over runs."""
    outputs, rates = {}, {impl: [] for impl in contenders}
    for impl in contenders:  # warm-up: JIT compiles, allocator, cuBLAS
        call(impl, warm=True)
    for _ in range(runs):
        for impl in contenders:
            seconds, outputs[impl] = timed(lambda: call(impl, warm=False))
            rates[impl].append(tokens / seconds)
    base, ours = contenders
    result = {impl: {"tokens_per_s": rates[impl], "median": statistics.median(rates[impl])} for impl in contenders}
    result["speedup"] = result[ours]["median"] / result[base]["median"]
    result["token_agreement"] = (outputs[base] == outputs[ours]).float().mean().item()
    print(f"{name}: {base} {result[base]['median']:.0f} tok/s, {ours} {result[ours]['median']:.0f} tok/s, "
          f"x{result['speedup']:.3f}, tokens agreeing {result['token_agreement']:.3f}", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--prompt-len", type=int, default=1024)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--block-size", type=int, default=256, help="continuous batching's cache block size")
    parser.add_argument("--max-batch-tokens", type=int, default=4096, help="continuous batching's step budget")
    parser.add_argument("--skip", choices=["generate", "continuous_batching"], action="append", default=[])
    parser.add_argument("--out", required=True, help="JSON file to write")
    args = parser.parse_args()

    model = build(args.layers)
    torch.manual_seed(1)
    ids = torch.randint(3, model.config.vocab_size, (args.batch, args.prompt_len), device="cuda")
    tokens = args.batch * args.new_tokens
    report = {"command": " ".join([sys.executable] + sys.argv), "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "transformers": transformers.__version__, "attnjit": attnjit.version(),
              "args": vars(args)}
    if "generate" not in args.skip:
        report["generate"] = compare(
            "generate", ("sdpa", "attnjit"),
            lambda impl, warm: run_generate(model, impl, ids, 16 if warm else args.new_tokens), args.runs, tokens)
    if "continuous_batching" not in args.skip:
        prompts = ids.tolist()
        blocks = args.batch * -(-(args.prompt_len + args.new_tokens) // args.block_size) + 8
        cb_config = ContinuousBatchingConfig(block_size=args.block_size, num_blocks=blocks,
                                             max_batch_tokens=args.max_batch_tokens, use_cuda_graph=False)
        report["continuous_batching"] = compare(
            "continuous_batching", ("paged|sdpa", "paged|attnjit"),
            lambda impl, warm: run_batch(model, impl, prompts, 16 if warm else args.new_tokens, cb_config),
            args.runs, tokens)
    report["attnjit_launches"] = dict(tj.launches)
    report["attnjit_plans"] = dict(tj.plans_made)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Where a transformers generate() step spends its time, attnjit against sdpa (issue 33, item 3).

For each --batches size, a random-weight model with Llama-3-8B-shaped layers generates --new-tokens
greedily from --prompt-len prompts with three attention functions, alternating over --runs:
- "sdpa" and "attnjit";
- "null", which returns an uninitialized output of the right shape and does no attention at all: the
  step time any attention backend could reach at best, so sdpa / null is the ceiling of a speed-up that
  comes from attention (Amdahl).
Milliseconds per generated step (median), and one cProfile of each real backend's run at the first batch
size: the functions with the most host time of their own, and the attention function's total. JSON to --json.
With --left-pad N, request i's prompt starts i * N // (batch - 1) tokens late (left padding, as generate()
pads a batch): every decode step then has a mask (attnjit asks it in the kernel); without, decode steps of
full-attention layers have none.

    python3 bench/transformers_step_profile.py --json /tmp/step_profile.json
"""

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time

import torch
import transformers
from transformers import AttentionInterface, AutoModelForCausalLM, LlamaConfig

import attnjit
import attnjit.integrations.transformers  # noqa: F401  (registers "attnjit")


def null_attention(module, query, key, value, attention_mask, **kwargs):
    """No attention: the output's shape and dtype only ([batch, q_len, heads, head_dim])."""
    return torch.empty(query.shape[0], query.shape[2], query.shape[1], query.shape[3], dtype=query.dtype,
                       device=query.device), None


def build(layers, vocab):
    config = LlamaConfig(vocab_size=vocab, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=128, rope_theta=500000.0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa").eval()


def left_padded(ids, left_pad):
    """(ids, attention_mask): request i's first i * left_pad // (batch - 1) tokens are padding."""
    mask = torch.ones_like(ids)
    batch = ids.shape[0]
    for i in range(1, batch):
        mask[i, :i * left_pad // (batch - 1)] = 0
    return ids.masked_fill(mask == 0, 0), mask


def generate(model, impl, ids, mask, new_tokens):
    model.set_attn_implementation(impl)
    with torch.no_grad():
        return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)


def step_ms(model, impl, ids, mask, new_tokens):
    torch.cuda.synchronize()
    start = time.perf_counter()
    generate(model, impl, ids, mask, new_tokens)
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - start) / new_tokens


def profile(model, impl, ids, mask, new_tokens, top):
    profiler = cProfile.Profile()
    torch.cuda.synchronize()
    profiler.enable()
    generate(model, impl, ids, mask, new_tokens)
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).sort_stats("tottime")
    stats.print_stats(top)
    attention = [(func, stat) for func, stat in stats.stats.items()
                 if func[2] in ("attnjit_attention_forward", "sdpa_attention_forward")]
    total_ms = {f"{func[2]}": 1e3 * stat[3] / new_tokens for func, stat in attention}  # cumulative per step
    return text.getvalue(), total_ms


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", default="1,16,32")
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--left-pad", type=int, default=0, help="most padding tokens of a request (see above)")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()

    AttentionInterface.register("null", null_attention)
    model = build(args.layers, args.vocab)
    impls = ("sdpa", "attnjit", "null")
    report = {"command": " ".join([sys.executable] + sys.argv), "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "transformers": transformers.__version__, "attnjit": attnjit.version(),
              "args": vars(args), "batches": {}}
    for index, batch in enumerate(int(b) for b in args.batches.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(batch)
        ids = torch.randint(3, args.vocab, (batch, args.prompt_len), device="cuda", generator=gen)
        ids, mask = left_padded(ids, args.left_pad)
        for impl in impls:
            generate(model, impl, ids, mask, 8)  # warm-up: JIT, allocator, cuBLAS
        times = {impl: [] for impl in impls}
        for _ in range(args.runs):
            for impl in impls:
                times[impl].append(step_ms(model, impl, ids, mask, args.new_tokens))
        row = {impl: {"ms_per_step": statistics.median(t), "runs": t} for impl, t in times.items()}
        row["attnjit_speedup"] = row["sdpa"]["ms_per_step"] / row["attnjit"]["ms_per_step"]
        row["ceiling_speedup"] = row["sdpa"]["ms_per_step"] / row["null"]["ms_per_step"]
        print(f"batch {batch:3d}: ms/step sdpa {row['sdpa']['ms_per_step']:.3f} attnjit "
              f"{row['attnjit']['ms_per_step']:.3f} null {row['null']['ms_per_step']:.3f}; attnjit "
              f"x{row['attnjit_speedup']:.3f}, ceiling x{row['ceiling_speedup']:.3f}", flush=True)
        if index == 0:
            for impl in ("sdpa", "attnjit"):
                text, attention_ms = profile(model, impl, ids, mask, args.new_tokens, args.top)
                row[f"profile_{impl}"] = {"attention_ms_per_step": attention_ms, "top": text}
                print(f"== cProfile {impl}, batch {batch}: attention function ms/step {attention_ms}\n{text}",
                      flush=True)
        report["batches"][batch] = row
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

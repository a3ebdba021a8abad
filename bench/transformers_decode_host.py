"""Host time of generate()'s decode steps inside the attention function alone (issue 33): attnjit against
sdpa's function and a "null" one that only allocates the output.

Steps as the DynamicCache makes them, without the model around them: for --layers layers, K/V [--batch,
8 KV heads, kv_len, 128] grow by one key a step through torch.cat (a new tensor per layer and step, as the
cache's), queries [batch, 32 heads, 1, 128] views of [batch, 1, 32, 128], and with --left-pad one new bool
mask per step shared by the layers (request i's first i * left_pad // (batch - 1) keys masked, as
generate() pads a batch). The GPU work of a step (the cats, the launches) is waited for after the step, as
generate()'s stopping check does, and is not timed: the timer is around each attention call only.

Per backend: microseconds of host time per step in the step's first call (where attnjit writes the step's
length, binds its mask, and plans when the keys outgrow the capacity), in each other call (mean), and the
step's total; attnjit's plans, length writes and mask binds per step; a cProfile of attnjit's calls (the
functions with the most own time). JSON to --json.

    python3 bench/transformers_decode_host.py --json /tmp/decode_host.json
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
from transformers import LlamaConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.models.llama.modeling_llama import LlamaAttention

import attnjit
import attnjit.integrations.transformers as tj

HEADS, KV_HEADS, DIM = 32, 8, 128


def attention_module():
    """A Llama-3-8B attention module (weights on the meta device: the functions only read its attributes)."""
    config = LlamaConfig(hidden_size=HEADS * DIM, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                         head_dim=DIM, num_hidden_layers=1)
    with torch.device("meta"):
        return LlamaAttention(config, layer_idx=0).eval()


def null_attention(module, query, key, value, attention_mask, **kwargs):
    return torch.empty(query.shape[0], query.shape[2], query.shape[1], query.shape[3], dtype=query.dtype,
                       device=query.device), None


FUNCTIONS = {"sdpa": sdpa_attention_forward, "attnjit": tj.attnjit_attention_forward, "null": null_attention}


def left_pad_starts(batch, left_pad):
    return torch.tensor([i * left_pad // max(batch - 1, 1) for i in range(batch)], device="cuda")


def run(impl, args, profiler=None):
    """{"first_us", "other_us", "step_us"} medians over the steps, per step of args.layers calls."""
    function, module = FUNCTIONS[impl], attention_module()
    scaling = module.scaling
    gen = torch.Generator(device="cuda").manual_seed(0)
    shape = (args.batch, KV_HEADS, args.prompt_len, DIM)
    caches = [[torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(2)]
              for _ in range(args.layers)]
    queries = [torch.randn(args.batch, 1, HEADS, DIM, device="cuda", dtype=torch.bfloat16,
                           generator=gen).transpose(1, 2) for _ in range(args.layers)]
    starts = left_pad_starts(args.batch, args.left_pad)
    first, other, total = [], [], []
    with torch.no_grad():
        for step in range(args.steps):
            kv_len = args.prompt_len + step + 1
            mask = None
            if args.left_pad:
                mask = (torch.arange(kv_len, device="cuda")[None, :] >= starts[:, None])[:, None, None, :]
            times = []
            for layer in range(args.layers):
                k, v = caches[layer]
                new = torch.randn(args.batch, KV_HEADS, 1, DIM, device="cuda", dtype=torch.bfloat16, generator=gen)
                k, v = caches[layer] = [torch.cat([k, new], dim=-2), torch.cat([v, new], dim=-2)]
                start = time.perf_counter()
                if profiler is not None:
                    profiler.enable()
                function(module, queries[layer], k, v, mask, dropout=0.0, scaling=scaling)
                if profiler is not None:
                    profiler.disable()
                times.append(time.perf_counter() - start)
            torch.cuda.synchronize()
            if step >= args.warmup:
                first.append(1e6 * times[0])
                other.append(1e6 * statistics.mean(times[1:]) if len(times) > 1 else 0.0)
                total.append(1e6 * sum(times))
    return {"first_us": statistics.median(first), "other_us": statistics.median(other),
            "step_us": statistics.median(total)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--prompt-len", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=160)
    parser.add_argument("--warmup", type=int, default=8, help="first steps left out of the medians (JIT, allocator)")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--left-pad", type=int, default=0, help="most padding keys of a request (0: no mask)")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()

    report = {"command": " ".join([sys.executable] + sys.argv), "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "transformers": transformers.__version__, "attnjit": attnjit.version(),
              "args": vars(args), "backends": {}}
    for impl in ("sdpa", "attnjit", "null"):
        counters = (dict(tj.plans_made), dict(tj.lengths_written), dict(tj.masks_bound))
        row = report["backends"][impl] = run(impl, args)
        if impl == "attnjit":
            after = (tj.plans_made, tj.lengths_written, tj.masks_bound)
            for name, was, now in zip(("plans", "length_writes", "mask_binds"), counters, after):
                row[f"{name}_per_step"] = (now["decode"] - was.get("decode", 0)) / args.steps
        print(f"{impl}: host us per step {row['step_us']:.1f} (first call {row['first_us']:.1f}, others "
              f"{row['other_us']:.1f} each)" + "".join(f", {k} {v:.3f}" for k, v in row.items() if "per_step" in k),
              flush=True)
    profiler = cProfile.Profile()
    run("attnjit", argparse.Namespace(**{**vars(args), "steps": 32, "warmup": 0}), profiler)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.top)
    report["profile_attnjit"] = text.getvalue()
    print(text.getvalue())
    with open(args.json, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

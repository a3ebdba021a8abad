"""fp8 prefill (issue 30, item 2) in one process on one GPU: attnjit's e4m3 single prefill (the
warp-specialized Hopper kernel, fp8 wgmma for both products) against its own bf16 prefill, FlashInfer's fa3
single prefill in fp8 and bf16, and cuDNN / flash SDPA in bf16; with the bf16 and fp8 dense GEMM rates of
the same run (torch.matmul and torch._scaled_mm, 8192^3).

d128, 16 heads, 16k tokens by default (--shapes SEQxHEADS,...), full and causal; q, K and V random, e4m3
with per-head float32 scales in [0.5, 2] (FlashInfer 0.7.2's scale_q / scale_k / scale_v), output bf16.
TFLOP/s = 4 s^2 h d, halved for causal. Two input sets (fp8: 3 x 32 MB each at 16k, beyond the 50 MB L2 in
turn), each call 8 times in one CUDA graph, the contenders interleaved rep by rep, median of 15
(prefill_peers.time_interleaved). Each fp8 output is also checked against SDPA (float32 math) on the
dequantized inputs: relative L2 and max abs error, so a fast wrong kernel shows.

  python3 bench/fp8_prefill_speed.py --json out.json [--quick] [--shapes 16384x16,4096x16]
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FP8_SPEEDUP = 1.5  # issue 30: fp8 >= 1.5x our bf16 at d128 16k


def parse_shapes(text):
    out = []
    for part in text.split(","):
        s, h = part.lower().split("x")
        out.append((int(s), int(h)))
    return out


def fp8_gemm_tflops(torch, peers, n=8192):
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    r = peers.time_interleaved({"gemm8": lambda i: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one,
                                                                      out_dtype=torch.bfloat16)}, 1, 10, 15)["gemm8"]
    return 2.0 * n ** 3 / (r["us"] * 1e-6) / 1e12 if "us" in r else None


def accuracy(torch, out, ref):
    out, ref = out.float(), ref.float()
    return {"rel_l2": float((out - ref).norm() / ref.norm()), "max_abs": float((out - ref).abs().max())}


def measure(torch, F, attnjit, flashinfer, peers, seqlen, heads, causal, iters, reps, sets=2, d=128):
    e4m3 = torch.float8_e4m3fn
    gen = torch.Generator(device="cuda").manual_seed(seqlen * 31 + heads + int(causal))
    inputs = []
    for _ in range(sets):
        x = [torch.randn(seqlen, heads, d, device="cuda", generator=gen) for _ in range(3)]
        scales = [0.5 + 1.5 * torch.rand(heads, device="cuda", generator=gen) for _ in range(3)]
        # The fp8 tensors hold x / scale, so x8 * scale is close to x (what the bf16 contenders get).
        x8 = [(t / s[None, :, None]).to(e4m3) for t, s in zip(x, scales)]
        xb = [t.to(torch.bfloat16) for t in x]
        inputs.append({"x8": x8, "scales": scales, "xb": xb})
    fns = {}

    def attnjit_fp8(i):
        x8, (sq, sk, sv) = inputs[i]["x8"], inputs[i]["scales"]
        return attnjit.single_prefill_with_kv_cache(*x8, scale_q=sq, scale_k=sk, scale_v=sv, o_dtype=torch.bfloat16,
                                                    causal=causal)
    fns["attnjit fp8"] = attnjit_fp8
    fns["attnjit bf16"] = lambda i: attnjit.single_prefill_with_kv_cache(*inputs[i]["xb"], causal=causal)
    if flashinfer is not None:
        def fi_fp8(i):
            x8, (sq, sk, sv) = inputs[i]["x8"], inputs[i]["scales"]
            return flashinfer.single_prefill_with_kv_cache(*x8, scale_q=sq, scale_k=sk, scale_v=sv,
                                                           o_dtype=torch.bfloat16, causal=causal, backend="fa3")
        fns["FlashInfer fa3 fp8"] = fi_fp8
        fns["FlashInfer fa3 bf16"] = lambda i: flashinfer.single_prefill_with_kv_cache(*inputs[i]["xb"], causal=causal,
                                                                                       backend="fa3")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for name, backend in (("cuDNN SDPA bf16", SDPBackend.CUDNN_ATTENTION), ("flash SDPA bf16", SDPBackend.FLASH_ATTENTION)):
        def sdpa(i, backend=backend):
            q, k, v = (t.transpose(0, 1).unsqueeze(0) for t in inputs[i]["xb"])
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        fns[name] = sdpa

    # Accuracy of the fp8 contenders on set 0, against float32 SDPA on the dequantized inputs.
    x8, scales = inputs[0]["x8"], inputs[0]["scales"]
    deq = [(t.float() * s[None, :, None]).transpose(0, 1).unsqueeze(0) for t, s in zip(x8, scales)]
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(*deq, is_causal=causal)[0].transpose(0, 1) if seqlen <= 4096 else None
    checks = {}
    for name in ("attnjit fp8", "FlashInfer fa3 fp8"):
        if name not in fns:
            continue
        try:
            out = fns[name](0)
            if ref is not None:
                checks[name] = accuracy(torch, out, ref)
        except Exception as e:
            checks[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    del deq, ref
    torch.cuda.empty_cache()
    res = peers.time_interleaved(fns, sets, iters, reps)
    flops = 4.0 * seqlen * seqlen * heads * d * (0.5 if causal else 1.0)
    for name, r in res.items():
        if "us" in r:
            r["tflops"] = flops / (r["us"] * 1e-6) / 1e12
        if name in checks:
            r["accuracy"] = checks[name]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the run here")
    ap.add_argument("--shapes", default="16384x16,4096x16", help="SEQLENxHEADS,... (d128)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    shapes = parse_shapes(args.shapes)
    sys.path.insert(0, HERE)
    import torch
    import torch.nn.functional as F

    import attnjit
    import prefill_peers as peers

    flashinfer, fi_error = peers.import_flashinfer()
    meta = {"command": " ".join([os.path.basename(sys.executable)] + sys.argv), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "flashinfer": flashinfer.__version__ if flashinfer else fi_error,
            "attnjit": attnjit.version(), "date": time.strftime("%Y-%m-%d"), "target_fp8_over_bf16": FP8_SPEEDUP}
    print(f"device: {meta['device']}  torch {meta['torch']}  flashinfer {meta['flashinfer']}", flush=True)
    data = dict(meta, gemm_tflops=peers.gemm_tflops(), rows=[])
    data["gemm_fp8_tflops"] = fp8_gemm_tflops(torch, peers)
    print(f"GEMM 8192^3: bf16 {data['gemm_tflops']:.0f} TFLOP/s, fp8 {data['gemm_fp8_tflops'] or 0:.0f}", flush=True)
    iters, reps = (4, 7) if args.quick else (8, 15)
    for seqlen, heads in shapes:
        for causal in (False, True):
            res = measure(torch, F, attnjit, flashinfer, peers, seqlen, heads, causal, iters, reps)
            row = {"seqlen": seqlen, "heads": heads, "head_dim": 128, "causal": causal, "results": res}
            a8, ab = res.get("attnjit fp8", {}).get("us"), res.get("attnjit bf16", {}).get("us")
            f8 = res.get("FlashInfer fa3 fp8", {}).get("us")
            row["fp8_over_bf16"] = ab / a8 if a8 and ab else None
            row["fp8_over_flashinfer_fp8"] = f8 / a8 if a8 and f8 else None
            data["rows"].append(row)
            print(f"prefill {seqlen}x{heads} d128 {'causal' if causal else 'full'}: " + "  ".join(
                f"{n} {r['tflops']:.0f}" if "tflops" in r else f"{n} ERROR {r.get('error', '')[:120]}"
                for n, r in res.items()), flush=True)
            print(f"  fp8/bf16 (attnjit) {row['fp8_over_bf16'] or 0:.2f}x (target {FP8_SPEEDUP}x); "
                  f"vs FlashInfer fa3 fp8 {row['fp8_over_flashinfer_fp8'] or 0:.2f}x; accuracy "
                  + json.dumps({n: r.get("accuracy") for n, r in res.items() if "accuracy" in r}), flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(data, f, indent=1)
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

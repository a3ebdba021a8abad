"""The prefill kernel's SASS without a GPU: compiles one variant with NVRTC
(the options the runtime uses), disassembles it with nvdisasm and prints
ptxas' registers and spills, then the KV-tile loop (the innermost loop with
every MMA) as an instruction histogram with its spill loads and stores.
It checks a kernel change before any GPU run: NVRTC's code differs from
nvcc's for the same source, so nvcc's SASS would not tell.

    pip install nvidia-cuda-nvdisasm         # nvdisasm, if the toolkit lacks it
    python3 tools/dev/prefill_sass.py --head-dim 128 --frags-m 2 --mask 1 --source RaggedKV
    python3 tools/dev/prefill_sass.py --kernels /tmp/old-kernels ...   # another tree's headers, to compare
    python3 tools/dev/prefill_sass.py --decode --source PagedKV --kv-dtype e4m3   # the tensor-core decode
    attnjit explain --problem '{...}' --variant v.json --source > tu.txt       # any kernel the planner picks,
    python3 tools/dev/prefill_sass.py --tu tu.txt --tu-index 2                  # user variants included

--mask: 0 none, 1 causal, 2 custom; --pos: 0 none, 1 RoPE, 2 ALiBi.
"""
import argparse
import collections
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def nvrtc_library():
    for pattern in ("/usr/local/cuda/lib64/libnvrtc.so*", "/usr/lib/x86_64-linux-gnu/libnvrtc.so*"):
        found = sorted(glob.glob(pattern))
        if found:
            return ctypes.CDLL(found[0])
    sys.exit("libnvrtc.so not found")


def compile_cubin(source, kernels, arch):
    lib = nvrtc_library()
    headers = sorted(glob.glob(os.path.join(kernels, "*.cuh")) + glob.glob(os.path.join(kernels, "*.h")))
    names = [os.path.basename(h).encode() for h in headers]
    texts = [open(h, "rb").read() for h in headers]
    n = len(headers)
    prog = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"variant.cu", n, (ctypes.c_char_p * n)(*texts),
                           (ctypes.c_char_p * n)(*names))
    # The runtime's options (runtime/src/cuda/nvrtc.cpp, engine.cpp), plus ptxas' report.
    opts = [f"--gpu-architecture={arch}".encode(), b"--frandom-seed=1", b"-std=c++17", b"-Xptxas=-v"]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        sys.exit(f"NVRTC failed ({rc}):\n{log.value.decode()}")
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetCUBIN(prog, cubin)
    return cubin.raw, log.value.decode()


def opcode(ins):
    words = ins.split()
    if words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0]


def kv_loop(sass):
    """The innermost loop holding the most MMAs: the KV-tile loop."""
    ins, labels = [], {}
    for line in sass.splitlines():
        m = re.match(r"^(\.L_x_\d+):", line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if m:
            ins.append(m.group(1).strip())
    best = None
    for i, text in enumerate(ins):
        m = re.search(r"BRA\s+`\((\.L_x_\d+)\)", text)
        if m and labels.get(m.group(1), i + 1) <= i:
            j = labels[m.group(1)]
            mmas = sum("HMMA" in x or "HGMMA" in x for x in ins[j:i + 1])
            if best is None or mmas > best[0] or (mmas == best[0] and i - j < best[2] - best[1]):
                best = (mmas, j, i)
    return ins, (ins[best[1]:best[2] + 1] if best else [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", default=os.path.join(ROOT, "kernels"))
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--frags-m", type=int, default=2, help="fa2: 16-row fragments per warp; --sm90: warpgroups")
    ap.add_argument("--mask", type=int, default=0)
    ap.add_argument("--pos", type=int, default=0)
    ap.add_argument("--soft-cap", action="store_true")
    ap.add_argument("--window", action="store_true")
    ap.add_argument("--source", default="RaggedKV", choices=["ContiguousKV", "RaggedKV", "PagedKV", "BlockTableKV"])
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--min-ctas", type=int, default=None,
                    help="__launch_bounds__ minimum CTAs per SM (default: the planner's, 3 at head_dim 64, else 1)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "e4m3"],
                    help="q's (e4m3: q, K and V, with --ws)")
    ap.add_argument("--o-dtype", default=None, help="the output's (default: --dtype; bf16 for e4m3)")
    ap.add_argument("--kv-dtype", default=None, help="bf16, f16, e4m3, e5m2 (default: --dtype)")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--sm90", action="store_true", help="the Hopper (wgmma) skeleton, templates/prefill_sm90.cu.in")
    ap.add_argument("--ws", action="store_true",
                    help="the warp-specialized Hopper skeleton, templates/prefill_sm90_ws.cu.in")
    ap.add_argument("--decode", action="store_true",
                    help="the tensor-core decode skeleton instead (templates/single_decode_tc.cu.in); "
                         "--heads / --tokens are its query rows, --source its KV")
    ap.add_argument("--heads", type=int, default=4, help="--decode: query heads per CTA")
    ap.add_argument("--tokens", type=int, default=1, help="--decode: query tokens per CTA (speculative decoding)")
    ap.add_argument("--persistent", action="store_true", help="--ws: the persistent CTA (items in rounds)")
    ap.add_argument("--sass", help="write the whole kernel's SASS here (to compare two trees' kernels)")
    ap.add_argument("--dump", help="write the loop's SASS here")
    ap.add_argument("--tu", help="`attnjit explain --source` output: compile its generated translation unit "
                                 "(--tu-index: which, from 1) instead of filling a template here")
    ap.add_argument("--tu-index", type=int, default=1)
    args = ap.parse_args()
    nvdisasm = os.environ.get("NVDISASM") or shutil.which("nvdisasm") or next(iter(glob.glob(os.path.join(
        os.path.dirname(sys.executable), "..", "lib", "python*", "site-packages", "nvidia", "cu*", "bin", "nvdisasm"))), None)
    if not nvdisasm:
        sys.exit("nvdisasm not found: pip install nvidia-cuda-nvdisasm, or put it on PATH")
    if args.tu:
        units = re.findall(r"^----- begin (\S+) -----\n(.*?)^----- end \1 -----$", open(args.tu).read(), re.S | re.M)
        if not 1 <= args.tu_index <= len(units):
            sys.exit(f"--tu-index={args.tu_index}; {args.tu} holds {len(units)} translation units")
        report(args, nvdisasm, *compile_cubin(units[args.tu_index - 1][1], args.kernels, args.arch))
        return
    # The runtime's own template (templates/prefill.cu.in), filled as PrefillKernel::template_values does.
    values = {"NAME": "prefill_sass", "SPEC_JSON": "{}", "HEAD_DIM": args.head_dim, "FRAGS_M": args.frags_m,
              "WARP_GROUPS": args.frags_m,
              "Q_TYPE": args.dtype, "KV_TYPE": args.kv_dtype or args.dtype, "O_TYPE": args.o_dtype or ("bf16" if args.dtype == "e4m3" else args.dtype),
              "POS_MODE": args.pos, "SOFT_CAP": str(args.soft_cap).lower(), "MASK_MODE": args.mask,
              "WINDOW": str(args.window).lower(), "KV_SOURCE": args.source, "STAGES": args.stages,
              "PERSISTENT": str(args.persistent).lower(),
              "MIN_CTAS_PER_SM": args.min_ctas or (3 if args.head_dim == 64 else 1)}
    if args.decode:  # DecodeKernel::template_values
        values.update({"HEADS_PER_CTA": args.heads, "WARPS": 4, "TOKENS_PER_CTA": args.tokens})
    template = ("single_decode_tc.cu.in" if args.decode else "prefill_sm90_ws.cu.in" if args.ws
                else "prefill_sm90.cu.in" if args.sm90 else "prefill.cu.in")
    source = open(os.path.join(ROOT, "templates", template)).read()
    for key, value in values.items():
        source = source.replace("{{" + key + "}}", str(value))
    if "{{" in source:
        sys.exit(f"templates/{template} has a placeholder this tool does not fill: " + source[source.index("{{"):][:40])
    report(args, nvdisasm, *compile_cubin(source, args.kernels, args.arch))


def report(args, nvdisasm, cubin, log):
    """ptxas' registers and spills, then the KV-tile loop's instruction histogram."""
    for line in log.splitlines():
        if "registers" in line or "spill" in line:
            print(line.replace("ptxas info    : ", "").strip())
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([nvdisasm, "-c", f.name], check=True, capture_output=True, text=True).stdout
    if args.sass:
        with open(args.sass, "w") as f:
            f.write(sass)
    ins, loop = kv_loop(sass)
    hist = collections.Counter(opcode(x) for x in loop)
    print(f"kernel: {len(ins)} instructions; KV-tile loop: {len(loop)}, of which spill loads "
          f"{sum(opcode(x) == 'LDL' for x in loop)}, stores {sum(opcode(x) == 'STL' for x in loop)}")
    print("loop: " + " ".join(f"{op}:{n}" for op, n in hist.most_common(24)))
    if args.dump:
        with open(args.dump, "w") as f:
            f.write("\n".join(loop) + "\n")


if __name__ == "__main__":
    main()

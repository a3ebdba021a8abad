"""Issue 30's prefill speed table without a GPU: the shapes (FlashAttention's grid at 16k tokens per batch,
2048 / head_dim heads, bf16), the contenders, the FLOP count, the ratios and the printed tables. Pure
Python, so that fa3_ws_speed.py's --dry-run and --table-from, and its tests, run where torch is missing."""
import json
from dataclasses import dataclass

TOKENS = 16384  # per batch: batch = TOKENS / seqlen
HIDDEN = 2048   # heads = HIDDEN / head_dim
L2_BYTES = 50 << 20

ATTNJIT = ("attnjit fa3_ws", "attnjit fa3", "attnjit fa2")
PEERS = ("cuDNN SDPA", "flash SDPA", "FlashInfer fa3", "FlashInfer fa2")
CONTENDERS = ATTNJIT + PEERS
BEST_PEERS = ("cuDNN SDPA", "FlashInfer fa3")  # the issue's bar: attnjit's best / max of these
SHORT = {"attnjit fa3_ws": "fa3_ws", "attnjit fa3": "fa3", "attnjit fa2": "fa2", "cuDNN SDPA": "cuDNN",
         "flash SDPA": "flash", "FlashInfer fa3": "FI fa3", "FlashInfer fa2": "FI fa2"}


@dataclass(frozen=True)
class Shape:
    head_dim: int
    seqlen: int
    batch: int

    @property
    def heads(self):
        return HIDDEN // self.head_dim

    @property
    def label(self):
        return f"d{self.head_dim} {self.seqlen}x{self.batch}"


SHAPES = [Shape(128, 512, 32), Shape(128, 1024, 16), Shape(128, 4096, 4), Shape(128, 16384, 1),
          Shape(64, 4096, 4), Shape(256, 4096, 4)]
QUICK = [Shape(128, 1024, 16), Shape(128, 16384, 1)]  # the 1.05x bar at 1k and the GEMM-fraction point


def parse_shapes(text):
    """Shapes from 'D:SEQxBATCH,...' (e.g. '128:4096x4,64:4096x4'); a clear ValueError naming the bad item."""
    shapes = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        try:
            d, rest = item.split(":")
            s, b = rest.lower().split("x")
            shape = Shape(int(d), int(s), int(b))
        except ValueError:
            raise ValueError(f"--shapes item '{item}' is not D:SEQxBATCH (e.g. 128:4096x4)") from None
        if shape.head_dim not in (64, 128, 256):
            raise ValueError(f"--shapes item '{item}': head_dim {shape.head_dim}; allowed: 64, 128, 256")
        if shape.seqlen < 1 or shape.batch < 1:
            raise ValueError(f"--shapes item '{item}': seqlen and batch must be at least 1")
        shapes.append(shape)
    if not shapes:
        raise ValueError(f"--shapes '{text}' names no shape")
    return shapes


def flops(shape, causal):
    """FlashAttention's count: 4 * b * h * s^2 * d, halved for causal."""
    f = 4.0 * shape.batch * shape.heads * shape.seqlen ** 2 * shape.head_dim
    return f / 2 if causal else f


def input_bytes(shape):
    """Q, K and V of one input set (bf16)."""
    return 3 * shape.batch * shape.seqlen * shape.heads * shape.head_dim * 2


def attnjit_problem(shape, causal, backend, op="batch_prefill"):
    """The `attnjit bench --problem` JSON: the ragged wrapper over `batch` requests, or (op single_prefill)
    one request with batch x heads heads (the same work and tiles)."""
    common = {"head_dim": shape.head_dim, "qo_len": shape.seqlen, "kv_len": shape.seqlen, "q_dtype": "bfloat16",
              "causal": causal, "backend": backend}
    if op == "batch_prefill":
        return {"op": op, "kv_source": "ragged", "batch_size": shape.batch, "num_qo_heads": shape.heads,
                "num_kv_heads": shape.heads, **common}
    if op == "single_prefill":
        h = shape.heads * shape.batch
        return {"op": op, "num_qo_heads": h, "num_kv_heads": h, **common}
    raise ValueError(f"op='{op}'; allowed: 'batch_prefill', 'single_prefill'")


def tflops_of(res):
    return res.get("tflops") if isinstance(res, dict) else None


def summarize(row, gemm_tflops):
    """Adds to a row (its "results": contender -> {"us", "tflops"}, {"error"} or {"skipped"}) each figure's
    fraction of the GEMM rate, attnjit's best backend, best / max(cuDNN, FlashInfer fa3) and attnjit fa2 /
    FlashInfer fa2."""
    res = row["results"]
    for r in res.values():
        if tflops_of(r) is not None and gemm_tflops:
            r["of_gemm"] = r["tflops"] / gemm_tflops
    ours = [(tflops_of(res.get(n)), n) for n in ATTNJIT if tflops_of(res.get(n)) is not None]
    peers = [(tflops_of(res.get(n)), n) for n in BEST_PEERS if tflops_of(res.get(n)) is not None]
    best, best_name = max(ours) if ours else (None, None)
    peer, peer_name = max(peers) if peers else (None, None)
    row["attnjit_best"] = best_name
    row["best_peer"] = peer_name
    row["best_vs_peer"] = best / peer if best and peer else None
    fa2, fi2 = tflops_of(res.get("attnjit fa2")), tflops_of(res.get("FlashInfer fa2"))
    row["fa2_vs_flashinfer_fa2"] = fa2 / fi2 if fa2 and fi2 else None
    row["best_of_gemm"] = best / gemm_tflops if best and gemm_tflops else None
    return row


def _cell(x, width, spec):
    return f"{x:{width}{spec}}" if isinstance(x, (int, float)) else f"{'-':>{width}}"


def table(rows, gemm_tflops):
    """The printed tables: TFLOP/s per contender with the ratios, then each figure as a fraction of the GEMM
    rate; errors listed under them."""
    names = [n for n in CONTENDERS if any(n in r["results"] for r in rows)]
    head = f"{'shape':<15} {'mask':<6} " + " ".join(f"{SHORT[n]:>7}" for n in names)
    lines = ["TFLOP/s (4*b*h*s^2*d, halved for causal)", head + f" {'best':>7} {'best/peer':>9} {'fa2/FI':>7}"]
    for r in rows:
        cells = " ".join(_cell(tflops_of(r["results"].get(n)), 7, ".1f") for n in names)
        best = SHORT.get(r.get("attnjit_best"), "-")
        lines.append(f"{r['label']:<15} {'causal' if r['causal'] else 'full':<6} {cells} {best:>7} "
                     f"{_cell(r.get('best_vs_peer'), 9, '.3f')} {_cell(r.get('fa2_vs_flashinfer_fa2'), 7, '.3f')}")
    lines.append("best/peer: attnjit's best backend / max(cuDNN SDPA, FlashInfer fa3); fa2/FI: attnjit fa2 / "
                 "FlashInfer fa2")
    lines.append("")
    lines.append(f"fraction of the bf16 GEMM rate ({_cell(gemm_tflops, 0, '.1f').strip()} TFLOP/s, torch.matmul)")
    lines.append(head)
    for r in rows:
        cells = " ".join(_cell(r["results"].get(n, {}).get("of_gemm"), 7, ".3f") for n in names)
        lines.append(f"{r['label']:<15} {'causal' if r['causal'] else 'full':<6} {cells}")
    errors = [f"  {r['label']} {'causal' if r['causal'] else 'full'} {n}: {x['error']}"
              for r in rows for n, x in r["results"].items() if isinstance(x, dict) and "error" in x]
    if errors:
        lines += ["", "errors:"] + errors
    return "\n".join(lines)


def table_from_json(path):
    """Re-prints a run's tables from its --json file, recomputing the ratios."""
    doc = json.load(open(path))
    gemm = doc.get("gemm_tflops")
    return table([summarize(r, gemm) for r in doc["rows"]], gemm)

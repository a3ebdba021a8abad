"""Issue 30's prefill speed table in one run on one GPU: attnjit's fa3_ws, fa3 and fa2 backends against
cuDNN and flash SDPA and FlashInfer's ragged prefill (fa3, fa2), bf16, 16k tokens per batch, 2048 / head_dim
heads, full and causal; TFLOP/s = 4*b*h*s^2*d (halved for causal), and each figure as a fraction of the
bf16 dense GEMM rate measured in the same run (torch.matmul 8192^3, before and after: the higher one).

attnjit's backends are timed by the CLI (`attnjit bench --problem`:
the ragged wrapper, K/V rotated over copies > 4x the L2, CUDA events around batches of launches, median of
30) in child processes run between the peers' timings on the same GPU; the peers run in this process
(bench/prefill_peers.py: CUDA graphs of 8 calls over 2 random input sets of 192 MB each,
interleaved, median of 15). Before any timing, FlashInfer's modules are built in child processes side by
side with `attnjit prewarm` of every attnjit kernel the run needs; a failed build or import is recorded in
the JSON and its column stays empty. (The Python module takes backend='fa3_ws' too; timing attnjit in this
process is still to do.)

  python3 bench/fa3_ws_speed.py --cli .gpu/attnjit --json out.json [--quick] [--shapes 128:4096x4]
  python3 bench/fa3_ws_speed.py --dry-run      (the plan, no GPU; checks the problems with `explain`)
  python3 bench/fa3_ws_speed.py --table-from out.json    (re-prints a run's tables)
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prefill_speed_table as tbl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ATTNJIT_BACKENDS = {"attnjit fa3_ws": "fa3_ws", "attnjit fa3": "fa3", "attnjit fa2": "fa2"}


def tail(text, lines=3):
    return " | ".join((text or "").strip().splitlines()[-lines:])[-400:]


def attnjit_result(cli, problem, timeout):
    """{"us", "plan"} of one `attnjit bench --problem` run, or {"error"}."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.json")
        try:
            r = subprocess.run([cli, "bench", "--skip-jit", "--problem", json.dumps(problem), "--json", path],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"attnjit bench ran past {timeout} s"}
        except OSError as e:
            return {"error": f"--cli={cli} cannot be run: {type(e).__name__}: {e}"}
        if r.returncode != 0:
            return {"error": f"attnjit bench exit {r.returncode}: {tail(r.stderr or r.stdout)}"}
        res = json.load(open(path))["results"][0]
        return {"us": res["us"], "how": "cli events", "plan": res["plan"].get("describe", "")}


def start_setup(args, shapes, fi_dims):
    """Child processes started side by side before any timing: `attnjit prewarm` of every attnjit kernel
    of the run, and one FlashInfer build per (backend, head dim). name -> (Popen, start time, log file)."""
    procs = {}
    manifest = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"problems": [tbl.attnjit_problem(s, c, b, args.attnjit_op) for s in shapes for c in (False, True)
                            for b in ATTNJIT_BACKENDS.values()]}, manifest)
    manifest.close()
    procs["manifest"] = manifest.name
    jobs = [("attnjit prewarm", [args.cli, "prewarm", "--manifest", manifest.name, "-j", str(args.prewarm_jobs)])]
    for d in fi_dims:
        for backend in ("fa3", "fa2"):
            jobs.append((f"FlashInfer {backend} d{d}", [sys.executable, os.path.join(HERE, "prefill_peers.py"),
                                                         "--build", backend, "--head-dim", str(d)]))
    for name, cmd in jobs:
        log = tempfile.TemporaryFile("w+")
        try:
            procs[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True), time.time(), log)
        except OSError as e:
            procs[name] = (None, time.time(), f"{type(e).__name__}: {e}")
    return procs


def finish_setup(procs, timeout):
    """name -> {"seconds"} or {"seconds", "error"} once every setup process has ended (killed past timeout)."""
    out = {}
    deadline = time.time() + timeout
    manifest = procs.pop("manifest")
    for name, (p, t0, log) in procs.items():
        if p is None:
            out[name] = {"seconds": 0.0, "error": log}
            continue
        try:
            rc = p.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            rc = f"killed past {timeout} s"
        out[name] = {"seconds": round(time.time() - t0, 1)}
        log.seek(0)
        text = log.read()
        log.close()
        if rc != 0:
            out[name]["error"] = f"exit {rc}: {tail(text)}"
        print(f"setup: {name}: {out[name]['seconds']:.1f} s" + (f"  FAILED {out[name]['error']}" if rc else ""),
              flush=True)
    os.unlink(manifest)  # read by prewarm, which has ended
    return out


def dry_run(args, shapes, fi_dims):
    """The plan of the run, and each attnjit problem checked by `attnjit explain` where the CLI exists."""
    print(f"shapes ({len(shapes)} x full, causal): bf16, {tbl.TOKENS // 1024}k tokens per batch, "
          f"{tbl.HIDDEN} / head_dim heads")
    for s in shapes:
        sets = input_sets(s)
        print(f"  {s.label:<14} heads {s.heads:>3}  GFLOP full {tbl.flops(s, False) / 1e9:8.1f} causal "
              f"{tbl.flops(s, True) / 1e9:8.1f}  inputs {sets} x {tbl.input_bytes(s) >> 20} MB")
    print(f"contenders: {', '.join(tbl.CONTENDERS)} (FlashInfer at head dims {sorted(fi_dims) or 'none'})")
    print(f"attnjit op: {args.attnjit_op}; peers: CUDA graphs of {args.iters} calls, median of {args.reps}")
    points = [(s, c, b, tbl.attnjit_problem(s, c, b, args.attnjit_op)) for s in shapes for c in (False, True)
              for b in ATTNJIT_BACKENDS.values()]
    if not os.path.exists(args.cli):
        print(f"{len(points)} attnjit problems (not checked: no CLI at {args.cli}), e.g. {json.dumps(points[0][3])}")
        return 0
    bad = 0
    for s, causal, backend, p in points:
        r = subprocess.run([args.cli, "explain", "--problem", json.dumps(p)], capture_output=True, text=True)
        kernels = [ln.split("]", 1)[1].strip() for ln in r.stdout.splitlines() if ln.startswith("[")]
        what = ", ".join(kernels) if r.returncode == 0 else "REFUSED " + tail(r.stderr or r.stdout, 1)
        bad += r.returncode != 0
        print(f"  {s.label:<14} {'causal' if causal else 'full':<6} {backend:<6} {what}")
    return 1 if bad else 0


def measure_row(args, shape, causal, peers, flashinfer, fi_error, fi_dims, setup, workspace):
    """One (shape, mask): attnjit's backends through the CLI, then the peers in this process."""
    flops = tbl.flops(shape, causal)
    res = {name: attnjit_result(args.cli, tbl.attnjit_problem(shape, causal, b, args.attnjit_op), args.cli_timeout)
           for name, b in ATTNJIT_BACKENDS.items()}
    fi_backends = []
    for backend in ("fa3", "fa2"):
        name = f"FlashInfer {backend}"
        build = setup.get(f"{name} d{shape.head_dim}", {})
        if shape.head_dim not in fi_dims:
            res[name] = {"skipped": "head dim not in --flashinfer-head-dims"}
        elif flashinfer is None:
            res[name] = {"error": f"not run: {fi_error}"}
        elif "error" in build:
            res[name] = {"error": f"not run: its build failed: {build['error']}"}
        else:
            fi_backends.append(backend)
    res.update(peers.measure_point(shape, causal, input_sets(shape), args.iters, args.reps, flashinfer, fi_backends,
                                   workspace))
    for r in res.values():
        if "us" in r:
            r["tflops"] = flops / (r["us"] * 1e-6) / 1e12
    return {"label": shape.label, "head_dim": shape.head_dim, "seqlen": shape.seqlen, "batch": shape.batch,
            "heads": shape.heads, "causal": causal, "flops": flops,
            "results": {n: res[n] for n in tbl.CONTENDERS if n in res}}


def input_sets(shape):
    """Random input sets the peers rotate over: at least 2, and together over 4x the L2."""
    return max(2, math.ceil(4 * tbl.L2_BYTES / tbl.input_bytes(shape)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default="build/attnjit", help="the attnjit CLI (default: build/attnjit)")
    ap.add_argument("--json", help="write the run (setup, GEMM rate, rows with ratios) here")
    ap.add_argument("--quick", action="store_true", help="only " + ", ".join(s.label for s in tbl.QUICK))
    ap.add_argument("--shapes", help="instead: D:SEQxBATCH,... (e.g. 128:4096x4,64:4096x4)")
    ap.add_argument("--attnjit-op", choices=["batch_prefill", "single_prefill"], default="batch_prefill",
                    help="attnjit's ragged wrapper over the batch, or one request with batch x heads heads")
    ap.add_argument("--flashinfer-head-dims", default="128",
                    help="head dims where FlashInfer runs (each one builds an fa3 and an fa2 module; '' none)")
    ap.add_argument("--iters", type=int, default=8, help="peer calls per timed graph replay")
    ap.add_argument("--reps", type=int, default=15, help="timed replays per peer (median)")
    ap.add_argument("--cli-timeout", type=int, default=90, help="seconds per attnjit bench run")
    ap.add_argument("--setup-timeout", type=int, default=150,
                    help="seconds for FlashInfer's builds and attnjit prewarm (killed past it: that FlashInfer "
                         "column stays empty; attnjit bench compiles what prewarm left out)")
    ap.add_argument("--prewarm-jobs", type=int, default=4, help="attnjit prewarm's parallel compiles")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (no GPU, no torch) and exit")
    ap.add_argument("--table-from", metavar="JSON", help="re-print the tables of an earlier --json and exit")
    args = ap.parse_args()
    if args.table_from:
        print(tbl.table_from_json(args.table_from))
        return 0
    try:
        shapes = tbl.parse_shapes(args.shapes) if args.shapes else tbl.QUICK if args.quick else tbl.SHAPES
    except ValueError as e:
        ap.error(str(e))
    fi_dims = {x.strip() for x in args.flashinfer_head_dims.split(",") if x.strip()}
    if not fi_dims <= {"64", "128", "256"}:
        ap.error(f"--flashinfer-head-dims={args.flashinfer_head_dims}; allowed: a subset of 64,128,256")
    fi_dims = {int(x) for x in fi_dims} & {s.head_dim for s in shapes}
    if args.iters < 1 or args.reps < 1:
        ap.error(f"--iters={args.iters} --reps={args.reps}; both must be at least 1")
    if args.dry_run:
        return dry_run(args, shapes, fi_dims)

    procs = start_setup(args, shapes, fi_dims)
    import torch
    import prefill_peers as peers
    flashinfer, fi_error = peers.import_flashinfer() if fi_dims else (None, "not asked for (--flashinfer-head-dims '')")
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  flashinfer: "
          f"{flashinfer.__version__ if flashinfer else fi_error}", flush=True)
    setup = finish_setup(procs, args.setup_timeout)
    gemm_runs = [peers.gemm_tflops()]
    print(f"bf16 GEMM (torch.matmul 8192^3): {gemm_runs[0]:.1f} TFLOP/s", flush=True)
    meta = {"command": " ".join(sys.argv), "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "flashinfer": flashinfer.__version__ if flashinfer else fi_error, "attnjit_op": args.attnjit_op,
            "iters": args.iters, "reps": args.reps, "setup": setup}

    def save(rows, gemm_runs):
        """The JSON so far (after each point: a run cut short by a timeout still leaves its rows)."""
        if args.json:
            gemm = max(gemm_runs)
            with open(args.json, "w") as f:
                json.dump({**meta, "gemm_tflops": gemm, "gemm_tflops_runs": gemm_runs,
                           "rows": [tbl.summarize(r, gemm) for r in rows]}, f, indent=1)

    workspace = torch.empty(peers.WORKSPACE_BYTES, dtype=torch.uint8, device="cuda") if flashinfer else None
    rows = []
    for shape in shapes:
        for causal in (False, True):
            rows.append(measure_row(args, shape, causal, peers, flashinfer, fi_error, fi_dims, setup, workspace))
            print(f"{shape.label} {'causal' if causal else 'full'}: " + " | ".join(
                f"{tbl.SHORT[n]} {r['tflops']:.0f}" if "tflops" in r else f"{tbl.SHORT[n]} -"
                for n, r in rows[-1]["results"].items()), flush=True)
            save(rows, gemm_runs)
    gemm_runs.append(peers.gemm_tflops())
    gemm = max(gemm_runs)
    print(f"bf16 GEMM after: {gemm_runs[1]:.1f} TFLOP/s\n", flush=True)
    save(rows, gemm_runs)
    print(tbl.table([tbl.summarize(r, gemm) for r in rows], gemm))
    return 0


if __name__ == "__main__":
    sys.exit(main())

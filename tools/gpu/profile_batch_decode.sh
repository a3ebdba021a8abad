#!/usr/bin/env bash
# One device step: ncu profiles of attnjit's paged batch decode beside
# FlashInfer's tensor-core decode (its paged prefill kernel) on
# compare_peers.py's batch-decode shapes (32 q / 8 kv heads, d 128, bf16,
# page_size 16, shuffled pages; SHAPES: 256x1024 and the skewed batch 1 x
# 32768 + 63 x 512 by default, also 64x4096 and 64x4096-fp8), through
# tools/bench/profile_batch_decode.py.
# Per shape and library: a first pass under `ncu --metrics
# gpu__time_duration.sum` that compiles (NVRTC / FlashInfer's nvcc JIT)
# outside the profiled process and lists every kernel with its duration
# (attnjit's decode kernel merges split requests itself); then one
# decode launch after two warm ones under `ncu --set full`, at the GPU's own
# clocks. Details, raw metrics, per-SASS stall samples and kernel lists as
# CSV go to $OUT/profile_batch_decode.tgz; summary lines printed. Sources
# tools/gpu/device_env.sh.
#   SHAPES="256x1024 skewed" bash tools/gpu/profile_batch_decode.sh     WHO=attnjit: ours only;
#   BUDGET_S=330: seconds after which the remaining steps are skipped (the tarball is still made);
#   KEEP_REP=1: keep the .ncu-rep files under $OUT
set -uo pipefail
source tools/gpu/device_env.sh
status=0
budget=${BUDGET_S:-330}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
left() { echo $((budget - SECONDS)); }
cap() { local l; l=$(left); echo $(($1 < l ? $1 : l)); }  # a step's timeout: its own or what is left

# Kernel list of a first pass (its CSV, wherever ncu wrote it): name (shortened), launches, mean duration, grid, block.
list_kernels() {
  python3 - "$@" <<'EOF'
import csv, sys, collections
rows = [l for f in sys.argv[1:] for l in open(f, errors="replace") if l.startswith('"')]
agg = collections.OrderedDict()
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    v = float(r["Metric Value"].replace(",", "")) * {"ns": 1e-3, "us": 1, "ms": 1e3, "nsecond": 1e-3,
                                                          "usecond": 1, "msecond": 1e3}[r["Metric Unit"]]
    k = (r["Kernel Name"][:90], r.get("Grid Size", ""), r.get("Block Size", ""))
    agg.setdefault(k, []).append(v)
for (name, grid, block), us in agg.items():
    print(f"  {len(us):3d} x {sum(us) / len(us):9.2f} us (last {us[-1]:9.2f})  grid {grid} block {block}  {name}")
EOF
}

# Summary of a --set full profile: the details page's headline metrics and the raw page's SM balance.
summarize() {
  python3 - "$1" "$2" <<'EOF'
import csv, sys
want = ["Duration", "Grid Size", "Block Size", "Registers Per Thread", "Dynamic Shared Memory Per Block",
        "Waves Per SM", "Theoretical Occupancy", "Achieved Occupancy", "DRAM Throughput", "Memory Throughput",
        "L2 Hit Rate", "L1/TEX Hit Rate", "Issue Slots Busy", "SM Busy", "Compute (SM) Throughput",
        "Warp Cycles Per Issued Instruction", "No Eligible"]
rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
got = {}
for r in csv.DictReader(rows):
    m = r.get("Metric Name")
    if m in want and m not in got:
        got[m] = f"{r['Metric Value']} {r.get('Metric Unit', '')}".strip()
print("  " + "; ".join(f"{m} {got[m]}" for m in want if m in got))
raw = [l for l in open(sys.argv[2], errors="replace") if l.startswith('"')]
if len(raw) >= 3:
    head, units, vals = next(csv.reader([raw[0]])), next(csv.reader([raw[1]])), next(csv.reader([raw[2]]))
    col = dict(zip(head, zip(vals, units)))
    keys = ["sm__cycles_active.avg", "sm__cycles_active.max", "sm__cycles_active.min", "gpc__cycles_elapsed.max",
            "dram__bytes_read.sum", "dram__bytes_read.sum.per_second", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "lts__t_sector_hit_rate.pct", "smsp__issue_active.avg.pct_of_peak_sustained_active"]
    print("  " + "; ".join(f"{k} {col[k][0]} {col[k][1]}" for k in keys if k in col))
EOF
}

for shape in ${SHAPES:-256x1024 skewed}; do
  for who in ${WHO:-attnjit flashinfer}; do
    re=$([ "$who" = attnjit ] && echo '^attnjit_single_decode' || echo 'BatchDecode|Prefill')
    name="bd_${who}_${shape}"
    args="--who $who --shape $shape"
    if [ "$(left)" -lt 40 ]; then echo "$name: skipped (budget)"; status=1; continue; fi
    # First pass: compiles outside the profiled process and lists every kernel (attnjit's decode, FlashInfer's).
    timeout "$(cap 240)" ncu --clock-control none --target-processes application-only --csv \
      --metrics gpu__time_duration.sum --log-file "$OUT/$name.kernels.csv" \
      python3 tools/bench/profile_batch_decode.py $args --iters 4 >"$OUT/$name.warm.log" 2>&1 \
      || { status=1; echo "$name: first pass failed"; tail -n 5 "$OUT/$name.warm.log"; continue; }
    echo "$name: kernels (t=${SECONDS}s)"; grep -E "^attnjit plan" "$OUT/$name.warm.log" | cut -c1-400
    list_kernels "$OUT/$name.kernels.csv" "$OUT/$name.warm.log"
    if [ "$(left)" -lt 30 ]; then echo "$name: full profile skipped (budget)"; status=1; continue; fi
    timeout "$(cap 200)" ncu --clock-control none --target-processes application-only --set full --import-source yes \
      --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,dram__bytes_read.sum \
      -k "regex:$re" --launch-skip 2 --launch-count 1 -o "$OUT/$name" -f \
      python3 tools/bench/profile_batch_decode.py $args --iters 4 >"$OUT/$name.ncu.log" 2>&1 || status=1
    ncu --import "$OUT/$name.ncu-rep" --page details --csv >"$OUT/$name.details.csv" 2>/dev/null || status=1
    ncu --import "$OUT/$name.ncu-rep" --page raw --csv >"$OUT/$name.raw.csv" 2>/dev/null || status=1
    ncu --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass >"$OUT/$name.sass.csv" 2>/dev/null || true
    [ -n "${KEEP_REP:-}" ] || rm -f "$OUT/$name.ncu-rep"
    echo "$name: profiled $(grep -m1 -E '"Duration"' "$OUT/$name.details.csv" | awk -F'","' '{print $5}' | cut -c1-80) (t=${SECONDS}s)"
    summarize "$OUT/$name.details.csv" "$OUT/$name.raw.csv"
  done
done
(cd "$OUT" && tar czf profile_batch_decode.tgz ./gpu.txt ./*.csv ./*.log && rm -f ./*.csv ./*.log)
exit $status

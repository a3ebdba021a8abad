#!/usr/bin/env bash
# One device-machine session: correctness on the GPU, then the benchmarks.
# Run from the repo root with a build/ made elsewhere and carried along:
#   bash tools/bench/run_gpu.sh            (logs under $OUT; the benchmarks' JSON in
#   tools/bench/results/, overwritten by each run and copied to $OUT/results/)
# Set QUICK=1 for a smoke subset of the GPU grid.
set -uo pipefail
OUT=${OUT:-/tmp/attnjit-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build}
R=tools/bench/results
mkdir -p "$OUT/results"
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-cache}
export PYTHONUNBUFFERED=1
status=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
"$B/attnjit" info 2>&1 | tee "$OUT/info.txt"

echo "== GPU tests"
${QUICK:+env ATTNJIT_TEST_QUICK=1} "$B/attnjit_tests" "[gpu]" --durations yes 2>&1 | tee "$OUT/gpu_tests.log" || status=1

echo "== Python module tests"
PYTHONPATH=tools/python ATTNJIT_LIBRARY="$B/libattnjit.so" python3 -m pytest -q tools/python/tests 2>&1 | tail -n 15 | tee "$OUT/pytest.log" || status=1

echo "== attnjit bench"
"$B/attnjit" bench --json "$R/bench.json" 2>&1 | tee "$OUT/bench.txt" || status=1

echo "== vs PyTorch SDPA"
PYTHONPATH=tools/python ATTNJIT_LIBRARY="$B/libattnjit.so" python3 tools/bench/compare_sdpa.py --json "$R/sdpa.json" 2>&1 | tee "$OUT/sdpa.txt" || status=1
cp "$R/bench.json" "$R/sdpa.json" "$OUT/results/" || status=1

echo "== summary"
grep -E "test cases|assertions|single decode grid|worst" "$OUT/gpu_tests.log" | head -20
cat "$OUT/bench.txt"
cat "$OUT/sdpa.txt"
exit $status

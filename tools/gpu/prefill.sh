#!/usr/bin/env bash
# One device-machine session for issue 7 (prefill): the prefill GPU tests,
# a compute-sanitizer pass over a reduced case, then the prefill benchmark.
# Run from the repo root with build/ carried along (built on the CPU machine):
#   bash tools/gpu/prefill.sh          (logs under $OUT; the bench's JSON in
#   tools/bench/results/single_prefill.json, copied to $OUT/results/)
set -uo pipefail
OUT=${OUT:-/tmp/attnjit-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build}
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-cache}
status=0
git log -1 --oneline 2>/dev/null | tee "$OUT/commit.txt"
nvidia-smi --query-gpu=name,clocks.sm,memory.total --format=csv | tee "$OUT/gpu.txt"

echo "== prefill and merge-state GPU tests"
"$B/attnjit_tests" "[gpu][prefill],[gpu][merge]" --durations yes 2>&1 | tee "$OUT/prefill_tests.log" || status=1

echo "== decode GPU tests (shared headers changed: variant.cuh, kv_source.cuh)"
ATTNJIT_TEST_QUICK=1 "$B/attnjit_tests" "[gpu][decode]" 2>&1 | tail -n 30 | tee "$OUT/decode_tests.log" || status=1

if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck (custom-mask == causal case)"
  compute-sanitizer --tool memcheck "$B/attnjit_tests" "single prefill: a custom mask*","batch prefill: the spec*" 2>&1 | tail -n 20 | tee "$OUT/memcheck.log" || status=1
  echo "== compute-sanitizer racecheck"
  compute-sanitizer --tool racecheck "$B/attnjit_tests" "single prefill: a custom mask*","batch prefill: the spec*" 2>&1 | tail -n 20 | tee "$OUT/racecheck.log" || status=1
fi

echo "== Python prefill tests (the spec's examples)"
PYTHONPATH=tools/python ATTNJIT_LIBRARY="$B/libattnjit.so" python3 -m pytest -q tools/python/tests/test_single_prefill.py \
  tools/python/tests/test_batch_prefill.py 2>&1 | tail -n 20 | tee "$OUT/pytest_prefill.log" || status=1

echo "== attnjit bench --op single_prefill"
"$B/attnjit" bench --skip-jit --op single_prefill --json tools/bench/results/single_prefill.json 2>&1 | tee "$OUT/bench_prefill.txt" || status=1
mkdir -p "$OUT/results" && cp tools/bench/results/single_prefill.json "$OUT/results/" || status=1

echo "== summary"
grep -E "test cases|assertions|prefill grid|worst|FAILED" "$OUT/prefill_tests.log" | head -30
exit $status

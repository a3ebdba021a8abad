#!/usr/bin/env bash
# Batch decode on the device machine in one command (no build there: carry a
# build/ made on an x86-64 machine): the GPU tests of batch and single decode
# (the shared skeletons changed), then `attnjit bench --op batch_decode` and
# single decode's bench for its speed before/after. Logs under $OUT; the
# benches' JSON in tools/bench/results/, copied to $OUT/results/.
#   bash tools/gpu/batch_decode.sh          QUICK=1: single decode's smoke subset
set -uo pipefail
OUT=${OUT:-/tmp/attnjit-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build}
R=tools/bench/results
mkdir -p "$OUT/results"
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-cache}
status=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
echo "== batch decode GPU tests"
"$B/attnjit_tests" "[gpu][batch_decode]" --durations yes 2>&1 | tee "$OUT/batch_decode_tests.log" || status=1
echo "== single decode GPU tests"
${QUICK:+env ATTNJIT_TEST_QUICK=1} "$B/attnjit_tests" "[gpu][decode]" 2>&1 | tail -n 30 | tee "$OUT/single_decode_tests.log" || status=1
echo "== bench: batch decode"
"$B/attnjit" bench --skip-jit --op batch_decode --json "$R/batch_decode.json" 2>&1 | tee "$OUT/bench_batch.txt" || status=1
echo "== bench: single decode"
"$B/attnjit" bench --skip-jit --op single_decode --json "$R/single_decode.json" 2>&1 | tee "$OUT/bench_single.txt" || status=1
cp "$R/batch_decode.json" "$R/single_decode.json" "$OUT/results/" || status=1
grep -E "test cases|assertions|grid:|worst" "$OUT"/*_tests.log | head -30
exit $status

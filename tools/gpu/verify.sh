#!/usr/bin/env bash
# One device-machine step after a merge: every [gpu] Catch2 test (quick
# single-decode grid), the Python GPU tests (with FlashInfer on the path, so
# the agreement tests run too), compute-sanitizer memcheck and racecheck over
# the newest kernel paths, and plan()'s host cost from `attnjit bench`.
# Binaries come packed (tools/gpu/pack.sh; the device tool carries at most
# 64 MB); FlashInfer's wheels in .peers/.
#   bash tools/gpu/verify.sh          (logs under $OUT)
# SANITIZE: the Catch2 test specs compute-sanitizer runs over; PYTEST=0
# skips the Python suite (FlashInfer's JIT builds make it ~250 s).
set -uo pipefail
SANITIZE=${SANITIZE:-"[graph][prefill],[fp8][batch],[speculative][split]"}
source tools/gpu/device_env.sh
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"

echo "== [gpu] tests"
ATTNJIT_TEST_QUICK=1 timeout 300 .gpu/attnjit_tests "[gpu]" --durations yes >"$OUT/gpu_tests.log" 2>&1 || status=1
grep -E "FAILED|test cases|assertions" "$OUT/gpu_tests.log" | tail -n 25

if [ "${PYTEST:-1}" = 1 ]; then
  echo "== Python GPU tests (FlashInfer present: the agreement tests run)"
  timeout 400 python3 -m pytest -q -rs tools/python/tests >"$OUT/pytest.log" 2>&1 || status=1
  grep -E "passed|failed|Error|SKIPPED" "$OUT/pytest.log" | tail -n 12
fi

echo "== compute-sanitizer over $SANITIZE"
sanitize_tests "$SANITIZE" || status=1

echo "== plan() host cost (attnjit bench --op batch_decode)"
timeout 120 .gpu/attnjit bench --skip-jit --op batch_decode --json "$RESULTS/batch_decode.json" \
  >"$OUT/bench_batch_decode.txt" 2>&1 || status=1
keep_result "$RESULTS/batch_decode.json" || status=1
grep -iE "plan|256" "$OUT/bench_batch_decode.txt" | head -n 12
exit $status

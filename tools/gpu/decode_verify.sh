#!/usr/bin/env bash
# One device step after a decode-kernel change: the decode family's GPU tests
# on the full grid (single and batch decode, all three entry points), then
# compute-sanitizer memcheck and racecheck over the reduced grid of batch
# decode (ATTNJIT_TEST_GRID=reduced: every variant axis at least once, the
# skewed and ragged split batches among them) and the quick grid of single
# decode, then the Python decode tests (FlashInfer present). Logs under $OUT.
#   bash tools/gpu/decode_verify.sh          PYTEST=0 skips the Python tests
set -uo pipefail
source tools/gpu/device_env.sh
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
echo "== decode GPU tests, full grid"
timeout 300 .gpu/attnjit_tests "[gpu][decode],[gpu][batch_decode]" >"$OUT/decode_tests.log" 2>&1 || status=1
grep -E "FAILED|test cases|assertions" "$OUT/decode_tests.log" | tail -n 12
echo "== compute-sanitizer"
batch='batch decode matches the float64 reference through all three entry points'
for tool in memcheck racecheck; do
  ATTNJIT_TEST_GRID=reduced timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 .gpu/attnjit_tests "$batch" \
    >"$OUT/${tool}_batch.log" 2>&1 || status=1
  echo "$tool (batch decode, reduced grid): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/${tool}_batch.log" | tail -n 1)" \
    "$(grep -E 'test cases' "$OUT/${tool}_batch.log" | tail -n 1)"
done
sanitize_tests "[gpu][decode]~[concurrency]" || status=1  # the 8-thread test: racecheck runs past its limit
if [ "${PYTEST:-1}" != 0 ]; then
  echo "== Python decode tests"
  timeout 300 python3 -m pytest -q -rfE --tb=short -k "decode" tools/python/tests >"$OUT/pytest.log" 2>&1 || status=1
  grep -E "passed|failed|^FAILED|^ERROR" "$OUT/pytest.log" | tail -n 12
fi
exit $status

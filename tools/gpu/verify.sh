#!/usr/bin/env bash
# One device-machine step after a merge: every [gpu] Catch2 test (quick
# single-decode grid), the Python GPU tests, compute-sanitizer memcheck and
# racecheck over the newest kernel paths, then the notebook from a pip install.
# Binaries come packed (the device tool carries at most 64 MB):
#   .gpupack/gpu.tar.xz  attnjit, attnjit_tests, libattnjit.so and the libraries the GPU image lacks
#   .nbwheels/           the portable attnjit wheel and the notebook extras' wheels
#   bash tools/gpu/verify.sh          (logs under $OUT)
set -uo pipefail
OUT=${OUT:-/tmp/attnjit-out}
mkdir -p "$OUT"
python3 -m tarfile -e .gpupack/gpu.tar.xz .
export LD_LIBRARY_PATH=$PWD/.gpu/lib ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-cache}
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"

echo "== [gpu] tests"
ATTNJIT_TEST_QUICK=1 timeout 240 .gpu/attnjit_tests "[gpu]" --durations yes >"$OUT/gpu_tests.log" 2>&1 || status=1
grep -E "grid|worst|passed|failed|FAILED|test cases" "$OUT/gpu_tests.log" | tail -n 25

echo "== Python GPU tests"
PYTHONPATH=tools/python ATTNJIT_LIBRARY=$PWD/.gpu/libattnjit.so timeout 150 python3 -m pytest -q -x \
  tools/python/tests >"$OUT/pytest.log" 2>&1 || status=1
tail -n 5 "$OUT/pytest.log"

echo "== compute-sanitizer over speculative decode and the merge"
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 .gpu/attnjit_tests \
    "[speculative][split],[speculative][sinks]" >"$OUT/$tool.log" 2>&1 || status=1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -n 1) $(grep -E 'test cases' "$OUT/$tool.log" | tail -n 1)"
done

echo "== notebook"
WHEELS=$PWD/.nbwheels timeout 240 bash tools/gpu/notebook.sh >"$OUT/notebook.log" 2>&1 || status=1
tail -n 8 "$OUT/notebook.log"
exit $status

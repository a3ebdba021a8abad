#!/usr/bin/env bash
# A/B of prefill kernel builds in one device session: each library named in
# LIBS (paths to libattnjit.so builds, e.g. HEAD against a working tree)
# runs FlashAttention's grid at head_dim 128 (or, with ONLY=paged, the paged
# prefill benchmark; with ONLY=prefill, single prefill on the grid's points,
# BACKEND=fa2|fa3 forcing attnjit's backend there; GRID_SEQS its lengths)
# beside FlashInfer fa2 and SDPA, in separate processes one after the other
# (the same GPU, minutes apart). Then, in this order: the Catch2 tests in
# TESTS (if set), compute-sanitizer memcheck + racecheck over the Catch2 specs
# in SANITIZE (if set), and the Python tests (unless PYTEST=0), verbose on
# failures.
#   LIBS=".gpupack/ab/v0.so .gpupack/ab/v1.so" bash tools/gpu/prefill_ab.sh   (logs under $OUT;
#   the paths are from the repository root: copy the libraries in after pack.sh;
#   the last library's JSON also in tools/bench/results/peers_<ONLY>.json)
set -uo pipefail
source tools/gpu/device_env.sh
status=0
for lib in ${LIBS:-.gpu/libattnjit.so}; do
  name=${ONLY:-prefill_grid}_$(basename "$lib" .so)  # a grid run and a paged run of one library keep both logs
  echo "== $lib"
  ATTNJIT_CACHE_DIR=/tmp/cache-$name ATTNJIT_LIBRARY=$PWD/$lib \
    timeout 240 python3 tools/bench/compare_peers.py --only ${ONLY:-prefill_grid} --grid-head-dims ${GRID_DIMS:-128} \
    --grid-seqlens ${GRID_SEQS:-512,1024,2048,4096,8192,16384} --attnjit-backend ${BACKEND:-auto} \
    --flashinfer-head-dims ${GRID_DIMS:-128} --json "$OUT/grid_$name.json" >"$OUT/grid_$name.log" 2>&1 || status=1
  grep -E "^prefill grid|^single prefill|^paged|GEMM" "$OUT/grid_$name.log"
  [ -e "$OUT/grid_$name.json" ] && cp "$OUT/grid_$name.json" "$RESULTS/peers_${ONLY:-prefill_grid}.json"
done
[ -e "$RESULTS/peers_${ONLY:-prefill_grid}.json" ] && keep_result "$RESULTS/peers_${ONLY:-prefill_grid}.json"
if [ -n "${TESTS:-}" ]; then
  echo "== Catch2 $TESTS"
  ATTNJIT_CACHE_DIR=/tmp/cache-tests timeout 240 .gpu/attnjit_tests "$TESTS" >"$OUT/tests.log" 2>&1 || status=1
  grep -E "FAILED|test cases|assertions" "$OUT/tests.log" | tail -n 12
fi
if [ -n "${SANITIZE:-}" ]; then
  echo "== compute-sanitizer over $SANITIZE"
  sanitize_tests "$SANITIZE" || status=1
fi
if [ "${PYTEST:-1}" != 0 ]; then
  echo "== Python tests"
  ATTNJIT_CACHE_DIR=/tmp/cache-py timeout 300 python3 -m pytest -q -rfE --tb=short --durations=8 tools/python/tests \
    >"$OUT/pytest.log" 2>&1 || status=1
  grep -E "passed|failed|^FAILED|^ERROR|Error" "$OUT/pytest.log" | tail -n 20
fi
exit $status

#!/usr/bin/env bash
# One device step for the FlashInfer drop-in (issue 29): every [gpu] Catch2
# test, the Python GPU suite with FlashInfer on the path (signatures, the
# engine harness replaying vLLM's and SGLang's call sequences, shared
# workspaces, the newly computed features), then compute-sanitizer memcheck
# and racecheck over the paths the drop-in added. Binaries come packed
# (tools/gpu/pack.sh); FlashInfer's wheels in .peers/.
#   bash tools/gpu/dropin.sh                (logs under $OUT)
# PARTS: any of "catch2 pytest sanitize bench" (default: the first three).
# bench: `attnjit bench --skip-jit` for BENCH_OPS (default batch_decode single_prefill), the CLI built
# from this tree against BASE_CLI (default .gpupack/base/attnjit, a build of an earlier commit, when
# present), alternating, ROUNDS times (default 2): same card, same process order, for an A/B.
# CATCH2: the Catch2 test specs to run (default [gpu]); PYTEST_ARGS: the pytest files (default all);
# SANITIZE: the specs compute-sanitizer runs over.
set -uo pipefail
PARTS=${PARTS:-"catch2 pytest sanitize"}
BASE_CLI=${BASE_CLI:-.gpupack/base/attnjit}
SANITIZE=${SANITIZE:-"[workspace],[page],[refused],[table_check]"}
source tools/gpu/device_env.sh
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"

if [[ " $PARTS " == *" catch2 "* ]]; then
  echo "== [gpu] Catch2 tests"
  ATTNJIT_TEST_QUICK=1 timeout 420 .gpu/attnjit_tests "${CATCH2:-[gpu]}" >"$OUT/gpu_tests.log" 2>&1 || status=1
  grep -E "FAILED|test cases|assertions" "$OUT/gpu_tests.log" | tail -n 20
fi
if [[ " $PARTS " == *" pytest "* ]]; then
  echo "== Python GPU tests"
  timeout 330 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider ${PYTEST_ARGS:-tools/python/tests} \
    >"$OUT/pytest.log" 2>&1 ||
    status=1
  grep -E "^FAILED|^ERROR|passed|failed" "$OUT/pytest.log" | tail -n 25
fi
if [[ " $PARTS " == *" sanitize "* ]]; then
  echo "== compute-sanitizer over $SANITIZE"
  sanitize_tests "$SANITIZE" || status=1
fi
if [[ " $PARTS " == *" bench "* ]]; then
  echo "== attnjit bench A/B (base: $BASE_CLI)"
  mkdir -p /tmp/bench
  for round in $(seq "${ROUNDS:-2}"); do
    for cli in "$BASE_CLI" .gpu/attnjit; do
      [ -x "$cli" ] || continue
      name=$( [ "$cli" = .gpu/attnjit ] && echo new || echo base )
      for op in ${BENCH_OPS:-batch_decode single_prefill}; do
        echo "=== $op $name round $round" >>"$OUT/bench.log"
        ATTNJIT_CACHE_DIR=/tmp/cache-$name timeout 150 "$cli" bench --skip-jit --op "$op" \
          --json "/tmp/bench/${op}_${name}_r$round.json" >>"$OUT/bench.log" 2>&1 || status=1
      done
    done
  done
  tar -cf "$OUT/bench_json.tar" -C /tmp/bench .  # the device tool brings back 8 files at most
  grep -E "^===|GB/s|TFLOP" "$OUT/bench.log" | tail -n 40
fi
exit $status

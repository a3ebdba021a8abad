#!/usr/bin/env bash
# Device step for the warp-specialized Hopper prefill (backend "fa3_ws",
# kernels/prefill_sm90_ws.cuh): its Catch2 GPU tests, compute-sanitizer
# memcheck, racecheck and synccheck on a few small cases, then issue 30's speed
# table (tools/bench/fa3_ws_speed.py): attnjit fa3_ws / fa3 / fa2 against cuDNN
# and flash SDPA and FlashInfer fa3 / fa2 (its modules built first, ~1 minute),
# and the bf16 GEMM rate of the same run; about 3 minutes, --quick about 1.5.
# Binaries come packed (tools/gpu/pack.sh).
#   bash tools/gpu/fa3_ws.sh        (logs under $OUT; SKIP_TESTS=1 / SKIP_SANITIZE=1 / SKIP_SPEED=1 leave steps out;
#                                    TESTS=<Catch2 spec>, SPEED_ARGS="--quick" or "--shapes 128:4096x4",
#                                    SPEED_TIMEOUT=240)
set -uo pipefail
source tools/gpu/device_env.sh
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"

if [ -z "${SKIP_TESTS:-}" ]; then
  echo "== Catch2 [fa3_ws]"
  timeout ${TEST_TIMEOUT:-150} .gpu/attnjit_tests "${TESTS:-[fa3_ws]}" >"$OUT/tests.log" 2>&1 || status=1
  grep -E "test cases|assertions|cases within|worst|FAILED|fa3_ws:" "$OUT/tests.log" | head -n 40
fi

if [ -z "${SKIP_SANITIZE:-}" ]; then
  echo "== compute-sanitizer [fa3_ws_small]"
  for tool in memcheck racecheck synccheck; do
    timeout ${SAN_TIMEOUT:-60} compute-sanitizer --tool "$tool" --error-exitcode 9 .gpu/attnjit_tests "[fa3_ws_small]" \
      >"$OUT/$tool.log" 2>&1 || status=1
    echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -n 1) $(grep -E 'test cases' "$OUT/$tool.log" | tail -n 1)"
  done
fi

if [ -z "${SKIP_SPEED:-}" ]; then
  echo "== speed: attnjit fa3_ws / fa3 / fa2 vs cuDNN, flash SDPA, FlashInfer fa3 / fa2; bf16 GEMM"
  timeout ${SPEED_TIMEOUT:-240} python3 tools/bench/fa3_ws_speed.py --cli .gpu/attnjit --json "$OUT/fa3_ws_speed.json" ${SPEED_ARGS:-} \
    2>&1 | tee "$OUT/speed.log" || status=1
fi
exit $status

#!/usr/bin/env bash
# One device step for a decode-kernel change: the decode GPU tests of the
# packed build first (quick grid: single and batch decode through every
# entry point; a failure stops the step before any timing), then the A/B:
# issue 6's batch shapes beside FlashInfer and SDPA for each library in LIBS
# (tools/gpu/decode_peers.sh) and single decode's fp8 / bf16 rows for each
# CLI in CLIS, alternating (tools/gpu/single_decode_ab.sh). Logs under $OUT.
#   LIBS=".gpupack/ab/base.so .gpu/libattnjit.so" CLIS=".gpupack/ab/base .gpu/attnjit" bash tools/gpu/decode_ab.sh
# A planner-only change: SINGLE=0 skips single decode; BATCH_SHAPES picks the
# batches (tools/gpu/decode_peers.sh).
set -uo pipefail
source tools/gpu/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
echo "== decode GPU tests (quick grid)"
ATTNJIT_TEST_QUICK=1 timeout 240 .gpu/attnjit_tests "[gpu][decode],[gpu][batch_decode]" >"$OUT/decode_tests.log" 2>&1
rc=$?
grep -E "FAILED|test cases|assertions|worst" "$OUT/decode_tests.log" | tail -n 12
[ $rc = 0 ] || exit $rc
status=0
bash tools/gpu/decode_peers.sh || status=1
[ "${SINGLE:-1}" = 0 ] || bash tools/gpu/single_decode_ab.sh || status=1
exit $status

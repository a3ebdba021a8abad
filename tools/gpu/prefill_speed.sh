#!/usr/bin/env bash
# Device step after a prefill kernel change: compute-sanitizer memcheck and
# racecheck over the prefill paths (single, ragged/paged batch, graph mode,
# fp8), the agreement tests against FlashInfer, FlashAttention's grid (every
# head dim; FlashInfer at GRID_FI_DIMS, each one an nvcc JIT build of its
# module) and the paged-prefill benchmark, all against FlashInfer fa2 and
# SDPA in the same process. Binaries come packed (tools/gpu/pack.sh);
# FlashInfer's wheels in .peers/.
#   bash tools/gpu/prefill_speed.sh   (logs under $OUT; JSON in tools/bench/results/, copied to $OUT/results/)
set -uo pipefail
SANITIZE=${SANITIZE:-"[graph][prefill],[fp8][batch],single prefill matches the float64 reference*"}
source tools/gpu/device_env.sh
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"

echo "== compute-sanitizer over $SANITIZE"
sanitize_tests "$SANITIZE" || status=1

echo "== agreement with FlashInfer"
timeout 200 python3 -m pytest -q -rfE --tb=short tools/python/tests/test_peer_agreement.py >"$OUT/pytest.log" 2>&1 || status=1
grep -E "passed|failed|^FAILED|Error" "$OUT/pytest.log" | tail -n 8

echo "== FlashAttention's grid"
timeout 300 python3 tools/bench/compare_peers.py --only prefill_grid --grid-head-dims ${GRID_DIMS:-64,128,256} \
  --flashinfer-head-dims ${GRID_FI_DIMS:-128} --json "$RESULTS/peers_prefill_grid.json" >"$OUT/grid.log" 2>&1 || status=1
grep -E "^device|GEMM|^prefill grid" "$OUT/grid.log"

echo "== paged prefill"
timeout 200 python3 tools/bench/compare_peers.py --only paged --json "$RESULTS/peers_paged.json" \
  >"$OUT/paged.log" 2>&1 || status=1
grep -E "^device|GEMM|^paged" "$OUT/paged.log"
for f in "$RESULTS"/peers_prefill_grid.json "$RESULTS"/peers_paged.json; do keep_result "$f" || status=1; done
exit $status

#!/usr/bin/env bash
# Device step for batch prefill's CUDA-graph mode and fp8 scales (issue 7):
# the prefill and merge GPU tests, compute-sanitizer memcheck and racecheck
# over the new graph-mode and fp8 cases, the Python batch prefill tests, and
# the paged-prefill benchmark (append, paged vs ragged, graph mode) against
# FlashInfer fa2 in the same process. Binaries come packed (tools/gpu/pack.sh);
# FlashInfer's wheels in .peers/.
#   bash tools/gpu/prefill_graph.sh          (logs under $OUT)
set -uo pipefail
source tools/gpu/device_env.sh
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"

echo "== prefill and merge GPU tests"
timeout 240 .gpu/attnjit_tests "[gpu][prefill],[gpu][merge]" --durations yes >"$OUT/prefill_tests.log" 2>&1 || status=1
grep -E "err\(o\)|passed|failed|FAILED|test cases" "$OUT/prefill_tests.log" | tail -n 30

echo "== compute-sanitizer over graph mode and fp8 scales"
sanitize_tests "[graph][prefill],[fp8][batch]" || status=1

echo "== Python batch prefill tests"
timeout 120 python3 -m pytest -q \
  tools/python/tests/test_batch_prefill.py tools/python/tests/test_binding.py >"$OUT/pytest.log" 2>&1 || status=1
tail -n 5 "$OUT/pytest.log"

echo "== paged prefill benchmark"
timeout 300 python3 tools/bench/compare_peers.py --only paged \
  --json "$RESULTS/peers_paged.json" >"$OUT/bench.log" 2>&1 || status=1
keep_result "$RESULTS/peers_paged.json" || status=1
grep -E "^device|GEMM|^paged" "$OUT/bench.log"
exit $status

#!/usr/bin/env bash
# One device step for issue 33 (attnjit as a transformers attention backend), on the GPU machine from the
# checkout's root, binaries packed by tools/gpu/pack.sh: the integration's tests (CPU checks, then the
# models against sdpa / eager on the GPU) and the generate benchmark (attnjit vs sdpa, and continuous
# batching vs paged sdpa). Logs under $OUT, the benchmark's JSON in $RESULTS and $OUT/results/.
#   bash tools/gpu/transformers.sh
# PARTS: any of "pytest bench" (default both); BENCH_ARGS: extra arguments for the benchmark
# (e.g. "--layers 2 --runs 2"). Under 5 minutes once attnjit's kernels are in the JIT cache; the first
# run on a fresh machine also compiles them (the tests' head_dim-64 variants, the benchmark's 128).
set -uo pipefail
PARTS=${PARTS:-"pytest bench"}
source tools/gpu/device_env.sh
status=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" |
  tee "$OUT/versions.txt"

if [[ " $PARTS " == *" pytest "* ]]; then
  echo "== transformers integration tests"
  timeout 180 python3 -m pytest -q -rfE -s --tb=short -p no:cacheprovider \
    tools/python/tests/test_transformers_args.py tools/python/tests/test_transformers_integration.py \
    >"$OUT/transformers_pytest.log" 2>&1 || status=1
  grep -E "attnjit/sdpa|^FAILED|^ERROR|passed|failed" "$OUT/transformers_pytest.log" | tail -n 40
fi
if [[ " $PARTS " == *" bench "* ]]; then
  echo "== generate: attnjit vs sdpa, continuous batching vs paged sdpa"
  mkdir -p "$RESULTS"
  # shellcheck disable=SC2086
  timeout 200 python3 tools/bench/transformers_generate.py --out "$RESULTS/transformers_generate.json" \
    ${BENCH_ARGS:-} >"$OUT/transformers_bench.log" 2>&1 || status=1
  grep -E "tok/s|warm-up|skipped|attention call|^generate:|^continuous_batching:|wrote|Error|error" \
    "$OUT/transformers_bench.log" | tail -n 30
  [ -f "$RESULTS/transformers_generate.json" ] && keep_result "$RESULTS/transformers_generate.json"
fi
exit $status

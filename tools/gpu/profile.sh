#!/usr/bin/env bash
# One device-machine step: ncu profiles of the kernels below their targets
# (prefill d128 non-causal and causal; paged batch decode bf16 and fp8), one
# launch each after warm-up, at the GPU's own clocks (--clock-control none).
# Reports and their detail pages as CSV go to $OUT. Needs the Python package
# (PYTHONPATH / ATTNJIT_LIBRARY set by the caller) and torch.
#   CASES="prefill decode_fp8" bash tools/gpu/profile.sh
set -uo pipefail
OUT=${OUT:-/tmp/attnjit-out}
mkdir -p "$OUT"
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-cache}
status=0
for c in ${CASES:-prefill prefill_causal decode_bf16 decode_fp8}; do
  # Warm-up run compiles the kernels outside the profiled process.
  python3 tools/bench/profile_kernels.py --case "$c" --iters 1 || status=1
  ncu --clock-control none --set full --import-source yes -k regex:attnjit --launch-skip 2 --launch-count 1 \
    -o "$OUT/$c" -f python3 tools/bench/profile_kernels.py --case "$c" >"$OUT/$c.ncu.log" 2>&1 || status=1
  ncu --import "$OUT/$c.ncu-rep" --page details --csv >"$OUT/$c.details.csv" 2>/dev/null || status=1
  ncu --import "$OUT/$c.ncu-rep" --page raw --csv >"$OUT/$c.raw.csv" 2>/dev/null || status=1
  # Per-instruction stall samples (SASS), to see which loop part waits.
  ncu --import "$OUT/$c.ncu-rep" --page source --csv --print-source sass >"$OUT/$c.sass.csv" 2>/dev/null || true
  echo "$c: $(grep -c . "$OUT/$c.details.csv") detail lines"
done
# One archive: the device tool brings back a limited number of files.
(cd "$OUT" && tar czf profile.tgz ./*.csv ./*.log && rm -f ./*.csv ./*.log)
exit $status

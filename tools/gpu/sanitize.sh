#!/usr/bin/env bash
# Device step: compute-sanitizer over Catch2 GPU tests, one run per tool, one log each and summary.md
# (the table docs/RELIABILITY.md carries) under $OUT. Exits non-zero if a tool reports an error or a
# test fails. Every kernel change runs it (the default: every [gpu] test on the reduced grid).
#   bash tools/gpu/sanitize.sh                   (DRY_RUN=1 prints the steps; tools/gpu/env.sh sets the rest)
# SANITIZE: Catch2 test specs (default "[gpu]"; racecheck leaves out [concurrency] there: the 8-thread
#   test reruns the grid from host threads and takes racecheck past ten minutes), e.g. "[fa3_ws_small]".
# TOOLS: any of "memcheck racecheck initcheck synccheck" (default all four).
# GRID: ATTNJIT_TEST_GRID (default reduced: every variant axis at least once, lengths off every tile);
#   QUICK=1: ATTNJIT_TEST_QUICK=1 (single decode's quick grid). SAN_TIMEOUT: seconds per tool (default 540).
set -uo pipefail
source tools/gpu/env.sh
spec=${SANITIZE:-[gpu]}
status=0
gpu_line
# One cache for every tool's run: the first compiles, the others load, so the time goes to the kernels.
export ATTNJIT_CACHE_DIR=/tmp/attnjit-sanitize-cache ATTNJIT_CACHE_MODE=readwrite ATTNJIT_TEST_GRID=${GRID:-reduced}
[ "${QUICK:-0}" = 1 ] && export ATTNJIT_TEST_QUICK=1
cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")

summary=$OUT/summary.md
printf '| tool | options | errors reported | tests | wall time | log |\n|---|---|---|---|---|---|\n' >"$summary"
for tool in ${TOOLS:-memcheck racecheck initcheck synccheck}; do
  case $tool in
    memcheck) opts=(--leak-check full) ;;
    racecheck) opts=(--racecheck-report all) ;;
    initcheck | synccheck) opts=() ;;
    *) echo "error: TOOLS: unknown tool '$tool'; allowed: memcheck racecheck initcheck synccheck" >&2; exit 2 ;;
  esac
  filter=$spec
  [ "$tool" = racecheck ] && [ "$spec" = "[gpu]" ] && filter="[gpu]~[concurrency]"
  echo "== compute-sanitizer --tool $tool ${opts[*]} on $filter"
  start=$SECONDS
  step "$tool.log" "${SAN_TIMEOUT:-540}" "$cs" --tool "$tool" "${opts[@]}" --error-exitcode 99 --print-limit 100 \
    "$BIN/attnjit_tests" "$filter"
  rc=$?
  [ -n "${DRY_RUN:-}" ] && continue
  errors=$(grep -oE '(ERROR|RACECHECK) SUMMARY: [0-9]+ (error|hazard)' "$OUT/$tool.log" | tail -n 1 | grep -oE '[0-9]+' || echo "?")
  tests=$(grep -E '^(All tests passed|test cases:)' "$OUT/$tool.log" | tail -n 1 || echo "no Catch2 summary")
  echo "$tool: exit $rc, $errors errors, $tests, $((SECONDS - start)) s"
  echo "| $tool | ${opts[*]} | $errors | $tests | $((SECONDS - start)) s | $tool.log |" >>"$summary"
  [ "$rc" = 0 ] || status=1
done
[ -n "${DRY_RUN:-}" ] || cat "$summary"
exit $status

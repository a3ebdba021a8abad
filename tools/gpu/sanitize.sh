#!/usr/bin/env bash
# compute-sanitizer over every kernel family attnjit has (single and batch
# decode on CUDA cores and on tensor cores, merge_states), through the [gpu]
# Catch2 tests on
# the reduced grid (ATTNJIT_TEST_GRID=reduced: every variant axis at least
# once, lengths that are not multiples of any tile, split + merge included),
# the CUDA-graph test and the multi-device test (skips with one GPU).
#
# Run on a GPU machine from the repository root, with build/ already built:
#   bash tools/gpu/sanitize.sh
# Writes one log per tool and summary.md (the table for docs/RELIABILITY.md)
# under $OUT if set, else build/sanitize/. Exits non-zero if any tool reports
# an error or a test fails. Every kernel change re-runs this script.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/sanitize}
mkdir -p "$out"
tests=${BUILD_DIR:-build}/attnjit_tests  # BUILD_DIR: a copied build (the device run carries one)
[ -x "$tests" ] || { echo "error: $tests is missing: build first (bash tools/setup/build.sh)" >&2; exit 2; }
cuda_home=${CUDA_HOME:-/usr/local/cuda}
cs=$(command -v compute-sanitizer || true)
for c in "$cuda_home/bin/compute-sanitizer" "$cuda_home/compute-sanitizer/compute-sanitizer"; do
  [ -n "$cs" ] || { [ -x "$c" ] && cs=$c; }
done
[ -n "$cs" ] || { echo "error: compute-sanitizer not found (PATH, $cuda_home/bin)" >&2; exit 2; }

export ATTNJIT_TEST_GRID=reduced
# One cache for all four runs: the first compiles, the others load, so the
# time goes to the sanitized kernels, not to NVRTC.
export ATTNJIT_CACHE_DIR="$out/cache"
export ATTNJIT_CACHE_MODE=readwrite
"$tests" "[gpu]" --list-tests >"$out/tests.txt" || true  # Catch2 exits with the number of tests listed

summary="$out/summary.md"
{
  echo "| tool | options | errors reported | tests | wall time | log |"
  echo "|---|---|---|---|---|---|"
} >"$summary"
failed=0
run_tool() {  # tool, extra options...
  local tool=$1; shift
  local log="$out/$tool.log" start=$SECONDS rc=0
  echo "== compute-sanitizer --tool $tool $*"
  # racecheck skips the 8-thread test: it runs the grid's kernels again from
  # several host threads (nothing new inside a CTA) and takes racecheck past
  # ten minutes.
  local filter="[gpu]"
  [ "$tool" = racecheck ] && filter="[gpu]~[concurrency]"
  "$cs" --tool "$tool" "$@" --error-exitcode 99 --print-limit 100 "$tests" "$filter" >"$log" 2>&1 || rc=$?
  local errors tests_line
  errors=$(grep -o 'ERROR SUMMARY: [0-9]* error' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  tests_line=$(grep -E '^(All tests passed|test cases:)' "$log" | tail -1 || echo "no Catch2 summary")
  echo "$tool: exit $rc, $errors errors, $tests_line, $((SECONDS - start)) s"
  echo "| $tool | $* | $errors | $tests_line | $((SECONDS - start)) s | $(basename "$log") |" >>"$summary"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
}
# TOOLS picks a subset ("memcheck racecheck"); all four by default.
for tool in ${TOOLS:-memcheck racecheck initcheck synccheck}; do
  case $tool in
    memcheck) run_tool memcheck --leak-check full ;;
    racecheck) run_tool racecheck --racecheck-report all ;;
    initcheck | synccheck) run_tool "$tool" ;;
    *) echo "error: TOOLS: unknown tool '$tool'; allowed: memcheck racecheck initcheck synccheck" >&2; exit 2 ;;
  esac
done
echo
cat "$summary"
exit "$failed"

#!/usr/bin/env bash
# Device step: the benchmarks named in BENCH, each writing its latest JSON to bench/results/<name>.json
# (copied to $OUT/results/; bench/README.md says which table of docs/PERFORMANCE.md each one feeds).
#   BENCH="batch_decode peers_batch" bash tools/gpu/bench.sh   (DRY_RUN=1 prints the steps; env.sh the rest)
# BENCH names (default "batch_decode"):
#   single_decode batch_decode single_prefill batch_prefill merge_state page: `attnjit bench --skip-jit --op`;
#   all: `attnjit bench` over every operator with the JIT timings (bench.json);
#   problems: `attnjit bench --problem` for each JSON problem in PROBLEMS (one per line; no JSON kept);
#   peers_batch peers_single peers_rope peers_prefill peers_prefill_grid peers_paged: bench/compare_peers.py
#     (--only batch|single|prefill|prefill_grid|paged, --rope), FlashInfer and SDPA in the same process;
#   fa3_ws_speed: bench/fa3_ws_speed.py, the batch prefill table (FlashInfer's fa3/fa2 modules built first);
#   sdpa: bench/compare_sdpa.py; transformers_generate: bench/transformers_generate.py;
#   transformers_step_profile: bench/transformers_step_profile.py (ms per generate step, cProfile); host_overhead;
#   user_variant_speed: bench/user_variant_speed.py (snippets vs built-ins, vs FlexAttention, cold compile);
#   fp8_prefill_speed: bench/fp8_prefill_speed.py (e4m3 single prefill vs bf16, FlashInfer fa3 fp8, SDPA).
# A/B: CLIS (CLI binaries, default $BIN/attnjit) alternate in ROUNDS rounds (default 1) for the CLI names;
#   LIBS (libraries, default $BIN/libattnjit.so) run the Python names one process each. Every run's JSON
#   goes to $OUT/bench_json.tar; the last one named is the one kept in bench/results/.
# ARGS_<name>: more arguments for that benchmark, e.g. ARGS_peers_batch="--batch-shapes 256x1024",
#   ARGS_peers_prefill_grid="--grid-head-dims 128 --attnjit-backend fa3", ARGS_fa3_ws_speed="--quick",
#   ARGS_transformers_generate="--layers 2 --runs 2". TIMEOUT: seconds per run (default 300).
set -uo pipefail
source tools/gpu/env.sh
status=0
runs=/tmp/attnjit-bench-runs
rm -rf "$runs" && mkdir -p "$runs" "$RESULTS"
gpu_line

# The extra arguments of benchmark $1 (ARGS_<name>), as words.
extra() { local v="ARGS_$1"; echo "${!v:-}"; }
# A file-name form of a path: .gpupack/ab/base -> gpupack_ab_base.
slug() { local s=${1#./}; s=${s#.}; echo "${s//[\/.]/_}"; }
# Keeps run JSON $1 as bench/results/$2.json.
latest() { [ -n "${DRY_RUN:-}" ] || { [ -e "$1" ] && cp "$1" "$RESULTS/$2.json" && keep_result "$RESULTS/$2.json"; }; }

cli_bench() {  # name, attnjit bench arguments...
  local name=$1 round cli tag
  shift
  for round in $(seq "${ROUNDS:-1}"); do
    for cli in ${CLIS:-$BIN/attnjit}; do
      tag=${name}_$(slug "$cli")_r$round
      echo "== $name: $cli round $round"
      # shellcheck disable=SC2046
      ATTNJIT_CACHE_DIR=/tmp/cache-$(slug "$cli") step "$tag.log" "${TIMEOUT:-300}" \
        "$cli" bench "$@" --json "$runs/$tag.json" $(extra "$name") || status=1
      show "$tag.log" "GB/s|TFLOP|JIT|^ +[0-9.]+ +[0-9]+ " 40
    done
  done
  latest "$runs/$tag.json" "$name"
}

py_bench() {  # name, script, its arguments... (the JSON path is appended as --json, or --out for transformers)
  local name=$1 script=$2 lib tag json_flag=--json i=0
  shift 2
  [ "$name" = transformers_generate ] && json_flag=--out
  for lib in ${LIBS:-$BIN/libattnjit.so}; do
    i=$((i + 1))
    tag=${name}_$(slug "$lib")_$i  # a library named twice keeps both runs
    echo "== $name: $lib"
    # shellcheck disable=SC2046
    ATTNJIT_LIBRARY=$PWD/$lib ATTNJIT_CACHE_DIR=/tmp/cache-$(slug "$lib") step "$tag.log" "${TIMEOUT:-300}" \
      python3 "$script" "$@" "$json_flag" "$runs/$tag.json" $(extra "$name") || status=1
    show "$tag.log" "^device|^batch|^single|^prefill|^paged|GEMM|tok/s|^generate:|^continuous|x cuDNN|Error|ms/step|\
^  (twin|flex|cold) " 40
  done
  latest "$runs/$tag.json" "$name"
}

for name in ${BENCH:-batch_decode}; do
  case $name in
    single_decode | batch_decode | single_prefill | batch_prefill | merge_state | page)
      cli_bench "$name" --skip-jit --op "$name" ;;
    all) cli_bench bench ;;
    problems)
      while IFS= read -r problem; do
        [ -n "$problem" ] || continue
        for round in $(seq "${ROUNDS:-1}"); do
          for cli in ${CLIS:-$BIN/attnjit}; do
            echo "== $cli r$round $problem"
            ATTNJIT_CACHE_DIR=/tmp/cache-$(slug "$cli") step problem.log "${TIMEOUT:-300}" \
              "$cli" bench --skip-jit --problem "$problem" || status=1
            [ -n "${DRY_RUN:-}" ] || tail -n 2 "$OUT/problem.log" | cut -c1-330 | sed "s|^|$cli r$round |" |
              tee -a "$OUT/problems.txt"
          done
        done
      done <<<"${PROBLEMS:?BENCH=problems needs PROBLEMS (JSON problems, one per line)}" ;;
    peers_rope) py_bench "$name" bench/compare_peers.py --rope ;;
    peers_*) py_bench "$name" bench/compare_peers.py --only "${name#peers_}" ;;
    fa3_ws_speed) py_bench "$name" bench/fa3_ws_speed.py --cli "$(echo ${CLIS:-$BIN/attnjit} | awk '{print $NF}')" ;;
    sdpa) py_bench "$name" bench/compare_sdpa.py ;;
    transformers_generate) py_bench "$name" bench/transformers_generate.py ;;
    transformers_step_profile) py_bench "$name" bench/transformers_step_profile.py ;;
    host_overhead) py_bench "$name" bench/host_overhead.py ;;
    user_variant_speed) py_bench "$name" bench/user_variant_speed.py ;;
    fp8_prefill_speed) py_bench "$name" bench/fp8_prefill_speed.py ;;
    *) echo "error: BENCH: unknown benchmark '$name'; allowed: single_decode batch_decode single_prefill" \
         "batch_prefill merge_state page all problems peers_batch peers_single peers_rope peers_prefill" \
         "peers_prefill_grid peers_paged fa3_ws_speed sdpa transformers_generate transformers_step_profile" \
         "host_overhead user_variant_speed fp8_prefill_speed" >&2
       exit 2 ;;
  esac
done
[ -n "${DRY_RUN:-}" ] || tar -cf "$OUT/bench_json.tar" -C "$runs" .  # the device tool brings back few files
exit $status

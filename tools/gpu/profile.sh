#!/usr/bin/env bash
# Device step: ncu profiles of named benchmark points at the GPU's own clocks (--clock-control none),
# after a warm-up run that compiles outside the profiled process. Per point and library: details, raw
# metrics and per-SASS stall samples as CSV, packed into $OUT/profile.tgz; a summary line printed.
#   POINTS="batch_decode --shape skewed; prefill --seq 512" bash tools/gpu/profile.sh   (DRY_RUN=1: print)
# POINTS: `;`-separated bench/profile_point.py arguments (default "batch_decode --shape 256x1024"), each
#   run for every library in WHO (default "attnjit flashinfer"); or PROBLEMS: JSON problems, one per line,
#   through `$CLI bench --skip-jit --problem` (attnjit only; CLI default $BIN/attnjit, LAUNCH_SKIP 40).
# KERNEL: ncu's -k (default regex:^attnjit for attnjit; FlashInfer's by op: BatchDecode|Prefill,
#   BatchPrefill, SinglePrefill with --single, SingleDecode). LAUNCH_SKIP (default 2) / LAUNCH_COUNT (1).
# SET: ncu --set (default full; none: only METRICS); METRICS: more metrics (comma-separated);
#   CACHE_CONTROL: all (default, flush between launches) or none. LIST=1: first a pass listing every
#   kernel with its duration (gpu__time_duration.sum). KEEP_REP=1 keeps the .ncu-rep files.
set -uo pipefail
source tools/gpu/env.sh
status=0
gpu_line
work=/tmp/attnjit-profile
rm -rf "$work" && mkdir -p "$work"

# ncu over one point: name, kernel filter, launch skip, command...
profile() {
  local name=$1 kernel=$2 skip=$3
  shift 3
  local set_args=(--set "${SET:-full}" --import-source yes)
  [ "${SET:-full}" = none ] && set_args=()
  if [ "${LIST:-0}" = 1 ]; then
    step "$name.list.log" 240 ncu --clock-control none --target-processes application-only --csv \
      --metrics gpu__time_duration.sum "$@" || status=1
    show "$name.list.log" '"gpu__time_duration.sum"' 30
  fi
  step "$name.ncu.log" 240 ncu --clock-control none --cache-control "${CACHE_CONTROL:-all}" \
    --target-processes application-only "${set_args[@]}" ${METRICS:+--metrics "$METRICS"} -k "$kernel" \
    --launch-skip "${LAUNCH_SKIP:-$skip}" --launch-count "${LAUNCH_COUNT:-1}" -o "$work/$name" -f "$@" || status=1
  [ -n "${DRY_RUN:-}" ] && return
  ncu --import "$work/$name.ncu-rep" --page details --csv >"$work/$name.details.csv" 2>/dev/null || status=1
  ncu --import "$work/$name.ncu-rep" --page raw --csv >"$work/$name.raw.csv" 2>/dev/null || status=1
  ncu --import "$work/$name.ncu-rep" --page source --csv --print-source sass >"$work/$name.sass.csv" 2>/dev/null || true
  cp "$OUT/$name".*.log "$work/"
  [ -n "${KEEP_REP:-}" ] && cp "$work/$name.ncu-rep" "$OUT/"
  echo "$name: $(grep -E '"(Duration|DRAM Throughput|Achieved Occupancy|Registers Per Thread)"' "$work/$name.details.csv" |
    awk -F'","' '{printf "%s %s %s; ", $(NF-2), $NF, $(NF-1)}' | cut -c1-400)"
}

if [ -n "${PROBLEMS:-}" ]; then
  cli=${CLI:-$BIN/attnjit} i=0
  while IFS= read -r problem; do
    [ -n "$problem" ] || continue
    i=$((i + 1))
    step "problem$i.warm.log" 240 "$cli" bench --skip-jit --problem "$problem" || status=1
    profile "problem$i" "${KERNEL:-regex:^attnjit}" 40 "$cli" bench --skip-jit --problem "$problem"
    echo "problem$i: $problem"
  done <<<"$PROBLEMS"
else
  IFS=';' read -ra points <<<"${POINTS:-batch_decode --shape 256x1024}"
  for point in "${points[@]}"; do
    read -ra args <<<"$point"
    [ ${#args[@]} -gt 0 ] || continue
    for who in ${WHO:-attnjit flashinfer}; do
      name=$(echo "${who}_${args[*]}" | tr -c 'A-Za-z0-9_\n-' '_' | tr -s '_')
      case "$who/${args[0]}" in
        attnjit/*) kernel=regex:^attnjit ;;
        */batch_decode) kernel='regex:BatchDecode|Prefill' ;;
        */single_decode) kernel=regex:SingleDecode ;;
        */prefill) [[ " ${args[*]} " == *" --single "* ]] && kernel=regex:SinglePrefill || kernel=regex:BatchPrefill ;;
        *) kernel=regex:. ;;
      esac
      step "$name.warm.log" 240 python3 bench/profile_point.py "${args[@]}" --who "$who" --iters 1 || {
        status=1
        show "$name.warm.log" . 5
        continue
      }
      profile "$name" "${KERNEL:-$kernel}" 2 python3 bench/profile_point.py "${args[@]}" --who "$who"
    done
  done
fi
rm -f "$work"/*.ncu-rep
[ -n "${DRY_RUN:-}" ] || tar czf "$OUT/profile.tgz" -C "$work" .  # one archive: the device tool brings back few files
exit $status

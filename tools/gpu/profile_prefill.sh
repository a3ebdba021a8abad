#!/usr/bin/env bash
# One device step: ncu profiles of attnjit's ragged prefill kernel beside
# FlashInfer's fa2 kernel on the same FlashAttention-grid shapes (d 128,
# bf16, 16k tokens; SEQS), one launch each after warm-up, at the GPU's own
# clocks. A short sequence shows the per-CTA fixed costs, a long one the
# steady-state loop. Summaries (details page as CSV, per-SASS stall samples)
# go to $OUT/profile_prefill.tgz. Sources tools/gpu/device_env.sh.
#   SEQS="512 16384" bash tools/gpu/profile_prefill.sh      WHO=attnjit: ours only; PAGED=1: the paged wrappers;
#   HEAD_DIM=256: another head dim; SINGLE=1: one request through single_prefill_with_kv_cache
set -uo pipefail
source tools/gpu/device_env.sh
status=0
for seq in ${SEQS:-512 16384}; do
  for who in ${WHO:-attnjit flashinfer}; do
    re=$([ "$who" = attnjit ] && echo attnjit || { [ -n "${SINGLE:-}" ] && echo SinglePrefill || echo BatchPrefill; })
    name="${who}_d${HEAD_DIM:-128}_${seq}${CAUSAL:+_causal}${PAGED:+_paged}${SINGLE:+_single}"
    args="--who $who --seq $seq --head-dim ${HEAD_DIM:-128} ${CAUSAL:+--causal} ${PAGED:+--paged} ${SINGLE:+--single}"
    # A warm-up run compiles (NVRTC / FlashInfer's nvcc JIT) outside the profiled process.
    timeout 240 python3 tools/bench/profile_prefill_peers.py $args --iters 1 \
      >"$OUT/$name.warm.log" 2>&1 || { status=1; tail -n 5 "$OUT/$name.warm.log"; continue; }
    timeout 200 ncu --clock-control none --set full --import-source yes -k "regex:$re" --launch-skip 2 --launch-count 1 \
      -o "$OUT/$name" -f python3 tools/bench/profile_prefill_peers.py $args >"$OUT/$name.ncu.log" 2>&1 || status=1
    ncu --import "$OUT/$name.ncu-rep" --page details --csv >"$OUT/$name.details.csv" 2>/dev/null || status=1
    ncu --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass >"$OUT/$name.sass.csv" 2>/dev/null || true
    echo "$name: $(grep -E '"Duration"' "$OUT/$name.details.csv" | head -n 1 | awk -F'","' '{print $(NF-1), $NF}')"
  done
done
(cd "$OUT" && tar czf "profile_prefill${PAGED:+_paged}${SINGLE:+_single}_d${HEAD_DIM:-128}.tgz" ./*.csv ./*.log && rm -f ./*.csv ./*.log ./*.ncu-rep)  # two runs (PAGED and not) keep both
exit $status

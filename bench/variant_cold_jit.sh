#!/usr/bin/env bash
# Issue 31's cold-compile targets on the CPU machine (no GPU needed): the kernels a snippet variant's first
# call compiles, as the planner picks them (`attnjit explain`), each set compiled into an empty cache by
# `attnjit prewarm -j 1` (one compile at a time) and -j 2, three runs each. Targets on the 2-core machine:
# decode <= 1.5 s, prefill <= 3 s.
#   bash bench/variant_cold_jit.sh [CLI]      (default build/attnjit)
# The variants (bench/variants/): ALiBi as score_mod on batch decode (32 / 8 heads, d 128, page 16);
# the document mask as mask_mod on a 16k single prefill (16 heads, d 128), without and with block sparsity
# (the fa3_ws kernel and the classification kernel).
set -euo pipefail
cd "$(dirname "$0")/.."
cli=${1:-build/attnjit}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
decode='{"op":"batch_decode","num_qo_heads":32,"num_kv_heads":8,"head_dim":128,"q_dtype":"bfloat16","page_size":16}'
prefill='{"op":"single_prefill","num_qo_heads":16,"num_kv_heads":16,"head_dim":128,"qo_len":16384,"kv_len":16384,"q_dtype":"bfloat16"}'
# The specs of the kernels the plan launches (explain's "spec:" lines under the plan's kernel list).
specs() {  # problem, variant file
  "$cli" explain --problem "$1" --variant "$2" --arch sm_90a --kv-len 16384 2>/dev/null |
    awk '/^  [a-z_]+ [a-z_0-9]+: grid /{n2=$2; sub(/:$/, "", n2); want[n2]=1} /^\[[0-9]+\/[0-9]+\] /{name=$2} /^  spec: /{if (want[name]) {sub(/^  spec: +/, ""); print}}'
}
for row in "decode alibi $decode" "prefill document $prefill" "prefill_block_sparse document_block_sparse $prefill"; do
  read -r what variant problem <<<"$row"
  specs "$problem" "bench/variants/$variant.json" >"$tmp/specs"
  python3 -c "import json,sys; print(json.dumps({'arch': 'sm_90a', 'kernels': [json.loads(l) for l in open(sys.argv[1])]}))" \
    "$tmp/specs" >"$tmp/manifest.json"
  n=$(wc -l <"$tmp/specs")
  for j in 1 2; do
    times=()
    for _ in 1 2 3; do
      rm -rf "$tmp/cache"
      s=$(date +%s.%N)
      "$cli" prewarm --manifest "$tmp/manifest.json" -j "$j" --cache-dir "$tmp/cache" >/dev/null
      times+=("$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$s" "$(date +%s.%N)")")
    done
    echo "$what ($n kernels) -j $j: ${times[*]} s"
  done
done

#!/usr/bin/env bash
# One device step: issue 6's decode targets in one run. Batch decode beside
# FlashInfer (tensor-core and CUDA-core paths) and SDPA through
# tools/bench/compare_peers.py --only batch (64 x 4096, 256 x 1024,
# 1 x 32768, the skewed batch, fp8 e4m3, MHA, q_len_per_req 4 vs 1), then
# `attnjit bench --op batch_decode` (driver copy rate, plan() host time).
# Logs under $OUT; the last library's JSON and the bench's in tools/bench/results/
# (peers_batch, peers_single, peers_rope; batch_decode), copied to $OUT/results/.
# Sources tools/gpu/device_env.sh.
#   bash tools/gpu/decode_peers.sh      LIBS=".gpupack/ab/a.so .gpupack/ab/b.so": one process each
#   BATCH_SHAPES="256x1024,34x4096,1x32768+63x512": those batches (bf16, 32 / 8 heads) instead of issue 6's rows
#   ATTNJIT_ONLY=1: without FlashInfer and SDPA; TAG=x: log and JSON names decode_peers_x_<lib>
#   ONLY=single: compare_peers.py's single-decode rows (fp8 against bf16 at 32k and 128k) instead
#   ROPE=1: the RoPE rows instead (compare_peers.py --rope; ONLY unset: single and batch)
set -uo pipefail
source tools/gpu/device_env.sh
status=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
only=${ONLY-batch}
[ -n "${ROPE:-}" ] && only=${ONLY:-}  # RoPE rows: single and batch unless ONLY says
peers=$RESULTS/peers_$only.json
[ -n "${ROPE:-}" ] && peers=$RESULTS/peers_rope${only:+_$only}.json
for lib in ${LIBS:-.gpu/libattnjit.so}; do  # LIBS: libraries to A/B, paths from the repository root
  base=decode_peers${TAG:+_$TAG}_$(basename "$lib" .so)
  name=$base round=1
  while [ -e "$OUT/$name.log" ]; do round=$((round + 1)); name=${base}_r$round; done  # a library named again keeps each round's files
  echo "== $lib"
  ATTNJIT_CACHE_DIR=/tmp/cache-$name ATTNJIT_LIBRARY=$PWD/$lib timeout 300 python3 tools/bench/compare_peers.py \
    ${ROPE:+--rope} ${only:+--only $only} ${BATCH_SHAPES:+--batch-shapes "$BATCH_SHAPES"} ${ATTNJIT_ONLY:+--attnjit-only} --json "$OUT/$name.json" >"$OUT/$name.log" 2>&1 || status=1
  grep -E "^device|^batch|^single" "$OUT/$name.log"
  [ -e "$OUT/$name.json" ] && cp "$OUT/$name.json" "$peers"
done
[ -e "$peers" ] && keep_result "$peers"
if [ "${BENCH:-1}" != 0 ]; then  # BENCH=0: the peers' rows only
  timeout 200 .gpu/attnjit bench --skip-jit --op batch_decode --json "$RESULTS/batch_decode.json" \
    >"$OUT/bench_batch_decode.txt" 2>&1 || status=1
  keep_result "$RESULTS/batch_decode.json" || status=1
  tail -n 20 "$OUT/bench_batch_decode.txt"
fi
exit $status

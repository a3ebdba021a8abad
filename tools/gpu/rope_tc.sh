#!/usr/bin/env bash
# One device step for RoPE on the tensor-core decode (kSplitQK): the decode
# GPU tests (single and batch, quick single-decode grid; both check RoPE's
# lse by absolute error), compute-sanitizer over the RoPE cases, then the
# speed that decides the automatic choice: RoPE and no RoPE, CUDA cores and
# tensor cores, at GQA groups 4 and 8 (batch 64 x 4096, page 16 shuffled;
# single decode 32k). Packed binaries (tools/gpu/pack.sh); logs under $OUT.
#   bash tools/gpu/rope_tc.sh
set -uo pipefail
source tools/gpu/device_env.sh
status=0
if [ "${SPEED_ONLY:-0}" != 1 ]; then
echo "== decode GPU tests"
ATTNJIT_TEST_QUICK=1 timeout 240 .gpu/attnjit_tests "[gpu][decode],[gpu][batch_decode]" >"$OUT/decode_tests.log" 2>&1 || status=1
grep -E "FAILED|test cases|assertions|worst|lse" "$OUT/decode_tests.log" | tail -n 30
echo "== compute-sanitizer over the RoPE tensor-core cases"
sanitize_tests "[batch_decode][rope]" || status=1
fi
echo "== speed: RoPE on CUDA cores vs tensor cores"
for hkv in 8 4; do
  for rope in NONE ROPE_LLAMA; do
    for tc in false true; do
      common="\"num_qo_heads\":32,\"num_kv_heads\":$hkv,\"head_dim\":128,\"q_dtype\":\"bfloat16\",\"pos_encoding_mode\":\"$rope\",\"use_tensor_cores\":$tc"
      for p in "{\"op\":\"batch_decode\",\"batch_size\":64,\"kv_len\":4096,\"page_size\":16,$common}" \
               "{\"op\":\"single_decode\",\"kv_len\":32768,$common}"; do
        timeout 60 .gpu/attnjit bench --skip-jit --problem "$p" 2>&1 | tail -n 2 | cut -c1-330 | tee -a "$OUT/rope_speed.txt" || status=1
      done
    done
  done
done
exit $status

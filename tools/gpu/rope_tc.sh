#!/usr/bin/env bash
# One device step for RoPE on the tensor-core decode (kSplitQK): the decode
# GPU tests (single and batch, quick single-decode grid; both check RoPE's
# lse by absolute error), compute-sanitizer over the RoPE cases, then the
# speed that decides the automatic choice: RoPE and no RoPE, CUDA cores and
# tensor cores, at GQA groups 4 and 8 (batch 64 x 4096, page 16 shuffled;
# single decode 32k). Packed binaries (tools/gpu/pack.sh); logs under $OUT.
#   bash tools/gpu/rope_tc.sh
#   SPEED_ONLY=1 AB=1 ROUNDS=2 CLIS=".gpupack/ab/base .gpu/attnjit" bash tools/gpu/rope_tc.sh
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
# The speed that decides the automatic choice (RoPE and no RoPE, CUDA and
# tensor cores, groups 4 and 8), or with AB=1 only the tensor-core RoPE
# kernels, bf16 and fp8 K/V, one and four tokens a request: the rows an A/B
# of the RoPE staging needs. CLIS: the CLI binaries to compare (each links
# the library statically), in ROUNDS alternating rounds.
problems=()
if [ "${AB:-0}" = 1 ]; then
  for hkv in 8 4; do
    for kv in bfloat16 float8_e4m3fn; do
      common="\"num_qo_heads\":32,\"num_kv_heads\":$hkv,\"head_dim\":128,\"q_dtype\":\"bfloat16\",\"kv_dtype\":\"$kv\",\"pos_encoding_mode\":\"ROPE_LLAMA\",\"use_tensor_cores\":true"
      problems+=("{\"op\":\"batch_decode\",\"batch_size\":64,\"kv_len\":4096,\"page_size\":16,$common}"
                 "{\"op\":\"single_decode\",\"kv_len\":32768,$common}")
      [ "$hkv" = 8 ] && problems+=("{\"op\":\"batch_decode\",\"batch_size\":64,\"kv_len\":4096,\"page_size\":16,\"q_len_per_req\":4,$common}")
    done
  done
else
  for hkv in 8 4; do
    for rope in NONE ROPE_LLAMA; do
      for tc in false true; do
        common="\"num_qo_heads\":32,\"num_kv_heads\":$hkv,\"head_dim\":128,\"q_dtype\":\"bfloat16\",\"pos_encoding_mode\":\"$rope\",\"use_tensor_cores\":$tc"
        problems+=("{\"op\":\"batch_decode\",\"batch_size\":64,\"kv_len\":4096,\"page_size\":16,$common}"
                   "{\"op\":\"single_decode\",\"kv_len\":32768,$common}")
      done
    done
  done
fi
echo "== speed"
for round in $(seq "${ROUNDS:-1}"); do
  for cli in ${CLIS:-.gpu/attnjit}; do
    name=$(basename "$cli")
    for p in "${problems[@]}"; do
      ATTNJIT_CACHE_DIR=/tmp/cache-$name timeout 60 "$cli" bench --skip-jit --problem "$p" 2>&1 | tail -n 2 | cut -c1-330 |
        sed "s|^|$name r$round |" | tee -a "$OUT/rope_speed.txt" || status=1
    done
  done
done
exit $status

#!/usr/bin/env bash
# One device step: ncu --set full (clocks as found) of the single-decode
# kernel at 32 q / 8 kv heads, d 128, 32k, bf16 and fp8 e4m3 KV, one launch
# each after warm-up, through the C++ CLI's bench (CLI: which binary).
# Details, raw metrics and per-SASS stall samples as CSV, packed into
# $OUT/profile_single_decode.tgz. Sources tools/gpu/device_env.sh.
#   CLI=.gpu/attnjit bash tools/gpu/profile_single_decode.sh
#   POS=ROPE_LLAMA: the same with RoPE (pos_encoding_mode)
set -uo pipefail
source tools/gpu/device_env.sh
cli=${CLI:-.gpu/attnjit}
status=0
for kv in bfloat16 float8_e4m3fn; do
  prob="{\"op\":\"single_decode\",\"num_qo_heads\":32,\"num_kv_heads\":8,\"head_dim\":128,\"kv_len\":32768,\"q_dtype\":\"bfloat16\",\"kv_dtype\":\"$kv\",\"pos_encoding_mode\":\"${POS:-NONE}\",\"use_tensor_cores\":true}"
  "$cli" bench --skip-jit --problem "$prob" >/dev/null 2>&1  # compiles outside the profiled process
  timeout 200 ncu --clock-control none --set full --import-source yes -k regex:attnjit_single_decode --launch-skip 40 \
    --launch-count 1 -o "$OUT/sd_$kv" -f "$cli" bench --skip-jit --problem "$prob" >"$OUT/sd_$kv.ncu.log" 2>&1 || status=1
  ncu --import "$OUT/sd_$kv.ncu-rep" --page details --csv >"$OUT/sd_$kv.details.csv" 2>/dev/null || status=1
  ncu --import "$OUT/sd_$kv.ncu-rep" --page raw --csv >"$OUT/sd_$kv.raw.csv" 2>/dev/null || status=1
  ncu --import "$OUT/sd_$kv.ncu-rep" --page source --csv --print-source sass >"$OUT/sd_$kv.sass.csv" 2>/dev/null || true
  rm -f "$OUT/sd_$kv.ncu-rep"
  grep -E "Duration|DRAM Throughput|Achieved Occupancy" "$OUT/sd_$kv.details.csv" | cut -d, -f12- | head -n 6
done
(cd "$OUT" && tar czf profile_single_decode.tgz ./sd_* && rm -f ./sd_*)
exit $status

#!/usr/bin/env bash
# One device step: single decode's fp8 and bf16 rows (32 q / 8 kv heads, d 128,
# 32k and 128k) for each CLI binary in CLIS (the C++ CLI links the library
# statically, so an A/B is two binaries), in rounds that alternate the
# binaries, then (NCU=1) each kernel's duration under ncu for the last binary
# at 32k, to split the end-to-end time into decode, merge and what lies
# between (NCU_CACHE=none: ncu keeps the L2 as the pipelined run leaves it
# instead of flushing it). LENS: the KV lengths (default 32k and 128k; a
# sweep down to 1k separates the per-call fixed cost from streaming).
# Logs under $OUT. Sources tools/gpu/device_env.sh.
#   CLIS=".gpupack/ab/a .gpupack/ab/b" ROUNDS=2 NCU=1 bash tools/gpu/single_decode_ab.sh
#   LENS="1024 4096 32768 131072" bash tools/gpu/single_decode_ab.sh
set -uo pipefail
source tools/gpu/device_env.sh
status=0
problems=() names=()
for kv in bfloat16 float8_e4m3fn; do
  for n in ${LENS:-32768 131072}; do
    names+=("${kv}_$n")
    problems+=("{\"op\":\"single_decode\",\"num_qo_heads\":32,\"num_kv_heads\":8,\"head_dim\":128,\"kv_len\":$n,\"q_dtype\":\"bfloat16\",\"kv_dtype\":\"$kv\",\"use_tensor_cores\":true}")
  done
done
for round in $(seq "${ROUNDS:-2}"); do
  for cli in ${CLIS:-.gpu/attnjit}; do
    name=$(basename "$cli")
    for prob in "${problems[@]}"; do
      ATTNJIT_CACHE_DIR=/tmp/cache-$name timeout 60 "$cli" bench --skip-jit --problem "$prob" 2>&1 |
        grep -E '^ +[0-9.]+ +[0-9]+ ' | sed "s|^|$name r$round |" | tee -a "$OUT/single_decode_ab.txt" || status=1
    done
  done
done
if [ "${NCU:-0}" = 1 ]; then
  cli=$(echo ${CLIS:-.gpu/attnjit} | awk '{print $NF}')
  for i in "${!names[@]}"; do
    case ${names[$i]} in *_32768) ;; *) continue ;; esac
    prob=${problems[$i]} log="$OUT/ncu_${names[$i]}.txt"
    echo "== ncu $prob"
    ATTNJIT_CACHE_DIR=/tmp/cache-$(basename "$cli") timeout 120 ncu --clock-control none --cache-control ${NCU_CACHE:-all} --launch-skip 40 \
      --launch-count 6 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__shared_mem_config_size,sm__warps_active.avg.per_cycle_active \
      "$cli" bench --skip-jit --problem "$prob" >"$log" 2>&1 || status=1
    grep -E "attnjit_|gpu__time_duration|dram__throughput|sm__cycles|launch__" "$log" | head -n 30
  done
fi
exit $status

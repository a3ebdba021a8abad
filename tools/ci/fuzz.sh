#!/usr/bin/env bash
# libFuzzer over the parsers that read input attnjit does not control:
#   fuzz_kernel_spec  manifest JSON: kernel specs and decode problems
#   fuzz_cache_entry  cache entry files
# Built with the distribution's clang (ASan + UBSan + libFuzzer) into
# build-fuzz/, each run for FUZZ_SECONDS (default 60) from its seed corpus in
# tools/fuzz/corpus/. Exits non-zero on any crash, sanitizer report or
# violated property; the reproducer is left in build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-60}
out=build-fuzz

# fmt, nlohmann-json, openssl headers, and clang with its runtimes (libclang_rt.fuzzer).
bash tools/setup/deps.sh clang libclang-rt-14-dev
cuda_home=${CUDA_HOME:-/usr/local/cuda}

mkdir -p "$out/artifacts"
common=(-std=c++17 -O1 -g -fno-omit-frame-pointer
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -DFMT_SHARED -DSPDLOG_SHARED_LIB -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DATTNJIT_BUILDING_LIBRARY
        -Ibase/include -Ibase -Iruntime/include -Iruntime/src -I. -Ikernels -I"$cuda_home/include")
build() {  # name, sources...
  local name=$1; shift
  echo "building $out/$name"
  clang++ "${common[@]}" "$@" -o "$out/$name" -lspdlog -lfmt -lcrypto
}
build fuzz_kernel_spec tools/fuzz/fuzz_kernel_spec.cpp runtime/src/spec/*.cpp runtime/src/types.cpp base/error.cpp \
  runtime/src/ops/single_decode/single_decode_problem.cpp runtime/src/ops/single_decode/single_decode_planner.cpp \
  runtime/src/ops/workspace_layout.cpp runtime/src/ops/kernel_launch.cpp runtime/src/ops/decode_choice.cpp \
  runtime/src/ops/attention_options/*.cpp runtime/src/ops/tensor_checks.cpp runtime/src/ops/split_states.cpp \
  runtime/src/variant.cpp runtime/src/tensor.cpp runtime/src/api/dlpack_codes.cpp base/sha256.cpp
build fuzz_cache_entry tools/fuzz/fuzz_cache_entry.cpp cache/entry_format.cpp base/sha256.cpp base/error.cpp

failed=0
for target in fuzz_kernel_spec fuzz_cache_entry; do
  seeds=tools/fuzz/corpus/${target#fuzz_}
  seeds=${seeds/kernel_spec/spec}
  seeds=${seeds/cache_entry/entry}
  work="$out/corpus-$target"
  mkdir -p "$work"
  log="$out/$target.log"
  start=$SECONDS
  rc=0
  # New inputs go to $work (kept between local runs); the seeds stay as committed.
  "$out/$target" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$out/artifacts/$target-" "$work" "$seeds" >"$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $target: $execs executions in $((SECONDS - start)) s, coverage $cov edges, no findings"
  else
    failed=$((failed + 1))
    echo "fuzz $target: FAILED (exit $rc) after $execs executions; log $log, reproducer in $out/artifacts/" >&2
    grep -E 'ERROR|runtime error|property violated|SUMMARY' "$log" | head -20 >&2 || true
  fi
done
exit "$failed"

# Sourced by the device steps that run packed binaries (verify.sh,
# prefill_graph.sh, prefill_ab.sh, prefill_speed.sh), on the GPU machine from
# the checkout's root: $OUT for logs, the binaries unpacked into .gpu/ (from
# tools/gpu/pack.sh's .gpupack/gpu.tar.xz), the library paths and kernel
# cache they use, and FlashInfer's wheels from .peers/ installed into
# /tmp/site (on PYTHONPATH with the attnjit module) with its JIT settings;
# $RESULTS and keep_result for the benchmarks' JSON; and sanitize_tests, the
# memcheck + racecheck step the scripts share.
OUT=${OUT:-/tmp/attnjit-out}
mkdir -p "$OUT"
python3 -m tarfile -e .gpupack/gpu.tar.xz . 2>/dev/null
export LD_LIBRARY_PATH=$PWD/.gpu/lib ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-cache}
export ATTNJIT_LIBRARY=$PWD/.gpu/libattnjit.so PYTHONPATH=/tmp/site:$PWD/tools/python
export FLASHINFER_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 FLASHINFER_WORKSPACE_BASE=/tmp/fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .peers/*.whl >/dev/null 2>&1

# Each benchmark's latest JSON goes to tools/bench/results/ (its README names
# the files); keep_result copies one to $OUT/results/, which the device tool
# brings back.
RESULTS=tools/bench/results
keep_result() { mkdir -p "$OUT/results" && cp "$1" "$OUT/results/"; }

# compute-sanitizer memcheck and racecheck over the Catch2 test specs in $1
# (quick single-decode grid), logs in $OUT/{memcheck,racecheck}.log, one
# summary line per tool; fails if either tool reports an error or a test fails.
sanitize_tests() {
  local tool rc=0
  for tool in memcheck racecheck; do
    ATTNJIT_TEST_QUICK=1 timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 9 .gpu/attnjit_tests "$1" \
      >"$OUT/$tool.log" 2>&1 || rc=1
    echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -n 1) $(grep -E 'test cases' "$OUT/$tool.log" | tail -n 1)"
  done
  return $rc
}

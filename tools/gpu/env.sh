# shellcheck shell=bash disable=SC2034  # RESULTS and BIN are for the scripts that source this
# Sourced by the device scripts (tests.sh, bench.sh, profile.sh, sanitize.sh) on the GPU machine, from
# the checkout's root: $OUT for logs (default /tmp/attnjit-out), the binaries in $BIN (default .gpu,
# unpacked from tools/gpu/pack.sh's .gpupack/gpu.tar.xz; BUILD_DIR=build: a build/ carried instead),
# the library and kernel cache they use, FlashInfer's wheels from .peers/ installed into /tmp/site (on
# PYTHONPATH with the attnjit module), $RESULTS (bench/results) and the helpers below.
# DRY_RUN=1: print each step instead of running it (works on a machine without a GPU).
OUT=${OUT:-/tmp/attnjit-out}
RESULTS=bench/results
mkdir -p "$OUT"
if [ -n "${BUILD_DIR:-}" ]; then
  BIN=$BUILD_DIR
else
  BIN=${BIN:-.gpu}
  [ -n "${DRY_RUN:-}" ] || [ ! -e .gpupack/gpu.tar.xz ] || python3 -m tarfile -e .gpupack/gpu.tar.xz .
  export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-cache} ATTNJIT_LIBRARY=$PWD/$BIN/libattnjit.so
export PYTHONPATH=/tmp/site:$PWD/tools/python PYTHONUNBUFFERED=1
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16} FLASHINFER_WORKSPACE_BASE=/tmp/fi
if [ -z "${DRY_RUN:-}" ] && compgen -G ".peers/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .peers/*.whl >/dev/null 2>&1
fi

# step LOG TIMEOUT CMD...: runs CMD under `timeout`, its output in $OUT/LOG (overwritten); DRY_RUN prints it instead.
step() {
  local log=$1 limit=$2
  shift 2
  if [ -n "${DRY_RUN:-}" ]; then
    echo "would run (timeout ${limit}s, log \$OUT/$log):$(printf ' %q' "$@")"
    return 0
  fi
  timeout "$limit" "$@" >"$OUT/$log" 2>&1
}

# The card and its clocks, once per script, into $OUT/gpu.txt.
gpu_line() {
  [ -n "${DRY_RUN:-}" ] && return 0
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
}

# Lines of a log worth printing (PATTERN, last N lines); nothing under DRY_RUN.
show() {
  [ -n "${DRY_RUN:-}" ] || grep -E "$2" "$OUT/$1" | tail -n "${3:-20}"
}

# Copies a benchmark's latest JSON to $OUT/results/, which the device tool brings back.
keep_result() {
  [ -n "${DRY_RUN:-}" ] && return 0
  [ -e "$1" ] && mkdir -p "$OUT/results" && cp "$1" "$OUT/results/"
}
